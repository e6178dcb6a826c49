"""laminae inside the agent frameworks: retrievers over an opened index (``laminae.open``).

``laminae.integrations.langchain`` (the ``langchain`` extra: langchain-core) and
``laminae.integrations.llama_index`` (the ``llama-index`` extra: llama-index-core) each wrap one
reader move (``laminae.integrations.moves``) in the framework's ``BaseRetriever``. This package
imports neither framework: ``import laminae`` never needs them.
"""
