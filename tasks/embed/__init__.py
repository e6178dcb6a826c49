"""Embed: node texts (and pictures, with an image-capable model) into vectors, on torch or ONNX Runtime."""
