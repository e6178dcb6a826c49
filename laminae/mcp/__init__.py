"""``laminae mcp``: an index served to agents over the Model Context Protocol, beside the reader.

Reads one index through the public reader (``laminae``) and imports nothing of the builder
(``laminae.flows``, ``laminae.tasks``); writes nothing but its reader pin. This package imports
nothing itself, so ``import laminae`` never needs the ``mcp`` extra; its modules, by job:
``server`` (``serve``: transports, settings, stop signals), ``tools`` (what an agent may ask),
``reads`` (the read workers and the pinned index), ``access`` (who may reach an HTTP server) and
``http`` (the HTTP connection guard).
"""
