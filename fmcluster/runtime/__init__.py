"""Node-side code: runs with the node's python3 (3.9+) and the standard library only.

Never import aws_cdk, pydantic, yaml, boto3 or other fmcluster modules from here.
"""
