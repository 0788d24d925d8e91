"""The TensorFlow backend: GPT-2's embedding and tied head as a tf.Module (model.py) and its Adapter (adapter.py)."""
