"""Embed: node texts (and pictures, with an image-capable model) into vectors, on torch or ONNX Runtime.

The builder's model layer: it imports the settings and the progress bars, nothing that imports the
reader, so that the reader may load the query model from it (``laminae.query.load_query_model``)."""
