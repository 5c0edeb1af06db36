"""The services that mount a store themselves, given its entry in their own format: the keys of `Mount.services`
(fmcluster.platforms.storage.forms). Plain names, read by the spec and the kinds without loading the mount forms."""

HYPERPOD = "sagemaker-hyperpod"  # an InstanceStorageConfigs entry of AWS::SageMaker::Cluster, as CloudFormation writes it
PARALLELCLUSTER = "parallelcluster"  # a SharedStorage entry of ParallelCluster 3's cluster configuration
# an InferenceEndpointConfig's modelSourceConfig (HyperPod Inference Operator) without its modelLocation: the
# operator mounts the store in the model's pods itself
HYPERPOD_INFERENCE = "sagemaker-hyperpod-inference"
SERVICES = (HYPERPOD, PARALLELCLUSTER, HYPERPOD_INFERENCE)
