"""Post-training jobs written for a spec's cluster (`fmcluster job rl`, `fmcluster job sft`): veRL GRPO on Ray and
supervised fine-tuning with Hugging Face TRL; docs/post-training.md."""
