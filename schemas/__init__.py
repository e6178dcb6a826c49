"""laminae's table contract: Arrow schemas and deterministic ids (imports only pyarrow)."""

from laminae.schemas.ids import content_hash, digest, document_id, edge_id, node_id, normalize_url
from laminae.schemas.tables import (
    COMPONENT_KINDS,
    DOCUMENT_KINDS,
    EDGE_KINDS,
    LAYERS,
    NODE_TABLES,
    SCHEMA_VERSION,
    SUBCOMPONENT_KINDS,
    TABLES,
    table_schemas,
    vector_type,
)

__all__ = [
    "COMPONENT_KINDS",
    "DOCUMENT_KINDS",
    "EDGE_KINDS",
    "LAYERS",
    "NODE_TABLES",
    "SCHEMA_VERSION",
    "SUBCOMPONENT_KINDS",
    "TABLES",
    "content_hash",
    "digest",
    "document_id",
    "edge_id",
    "node_id",
    "normalize_url",
    "table_schemas",
    "vector_type",
]
