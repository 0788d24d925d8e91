"""The PyTorch backend: GPT-2's token + position embedding and tied head as an nn.Module."""
