"""Training loops shared by the systems: supervised fine-tuning (sft) and GRPO (grpo)."""
