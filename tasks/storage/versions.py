"""An index's versions: manifests published (the commit), the reader snapshot of each, and the
maintenance of table versions: compaction, roll back, recovery, cleanup, pruning the raw store.

Reads and writes ``<index>/_manifests/`` (one JSON per published build, ``LATEST`` pointing at the
newest), ``<index>/_snapshots/`` and the tables' versions; ``IndexStore`` (its rows: metadata,
tables, writes) holds these as methods of ``Versions``, which uses only its ``files``, ``root``,
``table`` and ``metadata``. What the tables hold past the latest manifest is never published by
``compact`` (``roll_back``), and what dead runs left (temporary files, ``LATEST`` behind) is
cleared by the next writer (``recover``). Only the index's writer, under its lease, calls these.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import laminae
from laminae.pins import pinned_versions
from laminae.schemas.errors import LaminaeError
from laminae.schemas.storage import MANIFEST_DIR, SNAPSHOT_DIR, snapshot_dir, storage_options
from laminae.schemas.tables import SCHEMA_VERSION, TABLES
from laminae.snapshots import crash_point, link, prune, remove_abandoned, snapshot_problem, version_of

log = logging.getLogger("laminae.store")

# tables whose rows exist for readers only once a manifest names them; the others are logs whose
# rows are facts once written (errors, runs) and the embedding cache, which no reader reads
COMMITTED_TABLES = ("documents", "components", "subcomponents", "edges", "fetches")


class IndexConfigError(LaminaeError, RuntimeError):
    """The index cannot be written as asked; the message says how to fix it."""

    exit_code = 2


KEEP_EVERYTHING = timedelta(days=36500)  # optimize() without pruning: its default prunes after 7 days
CLEANUP_MARGIN_S = 0.5


def s3_object(root: str, rel: str):
    """(boto3 client, bucket, key) of file ``rel`` of the index at ``s3://bucket/prefix``: the
    conditional writes (If-None-Match, If-Match) pyarrow's S3 file system does not offer."""
    import boto3

    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    options = storage_options(root) or {}
    client = boto3.client("s3", endpoint_url=options.get("endpoint"), region_name=options.get("region"))
    return client, bucket, f"{prefix.rstrip('/')}/{rel}".lstrip("/")



class Versions:
    """The manifests and table versions of one index opened for writing (``IndexStore``)."""

    def write_snapshot(self, version: int, same_as: int | None = None) -> None:
        """Save the reader's in-memory view of manifest ``version`` (``clean_up`` removes the
        snapshots of manifests no longer kept).

        ``same_as``: an earlier version with the same node and edge contents, whose snapshot is
        hard-linked instead of rebuilt (a refresh that changed nothing).
        """
        if self.files.local is None:
            return  # snapshots are memory-mapped files: local indexes only
        target = snapshot_dir(str(self.root), version)
        source = snapshot_dir(str(self.root), same_as) if same_as else None
        if source is not None and snapshot_problem(source) is None and not target.exists():
            link(source, target)
            return
        opened = laminae.open(str(self.root), version=version)  # rebuilds a damaged one by itself
        if snapshot_problem(target) is not None:
            opened.save_snapshot()

    def compact_tables(self) -> None:
        """Compact every table (LanceDB ``optimize``, pruning nothing: small fragments merged,
        mostly-deleted ones rewritten) before publishing, so that the manifest names compacted
        versions. The cleanup after publishing goes through ``optimize`` too (the only pruning
        LanceDB offers without pylance), which compacts whatever it finds: compacting here leaves it
        nothing to rewrite, so it adds no copy of a table beside the versions the manifests keep."""
        for name in TABLES:
            self.table(name).optimize(cleanup_older_than=KEEP_EVERYTHING)

    def clean_up(self, keep: int) -> dict[str, int]:
        """Delete every table version older than those the newest ``keep`` manifests name, with the
        data files only they use, the snapshots of every manifest but the latest and pinned ones,
        and the raw-store files no kept version refers to; returns the number of versions deleted,
        by table.

        Only the index's writer may call this (under its lease): files of an unfinished write look
        like garbage to a cleanup, and only the lease says there is none. A reader opened on one of
        the newest ``keep`` manifests, or on one a live reader pin names (``laminae.pins``: the MCP
        server pins the manifest it serves), keeps every table version it reads; an older reader's
        table versions are gone (the snapshot it memory-mapped stays readable until it closes)."""
        if keep < 1:
            raise IndexConfigError(f"keep_manifests must be at least 1, got {keep}")
        published = self.manifest_versions()
        kept = sorted(set(published[-keep:]) | (pinned_versions(self.files) & set(published)))
        oldest: dict[str, int] = {}
        for number in kept:
            for name, table_version in self._manifest_tables(number).items():
                oldest[name] = min(oldest.get(name, table_version), table_version)
        # no reader reads the embedding cache: only its latest version is kept
        oldest["embeddings"] = self.table("embeddings").version
        freed: dict[str, int] = {}
        for name in TABLES:
            if name not in oldest:
                continue
            tbl = self.table(name)
            stamps = {v["version"]: v["timestamp"] for v in tbl.list_versions()}
            if oldest[name] not in stamps or min(stamps) >= oldest[name]:
                continue
            # LanceDB prunes by age: versions older than its "now", when it gets to pruning, minus
            # cleanup_older_than. A first optimize does whatever compaction and index merging is
            # left, so that the second reaches pruning at once; the margin covers that moment and
            # keeps, never drops, a version made within it before the oldest one kept.
            tbl.optimize(cleanup_older_than=KEEP_EVERYTHING)
            stamp = stamps[oldest[name]]
            age = time.time() - stamp.timestamp()  # naive stamps are local time, as .timestamp() reads them
            tbl.optimize(cleanup_older_than=timedelta(seconds=age + CLEANUP_MARGIN_S), delete_unverified=True)
            left = {v["version"] for v in tbl.list_versions()}
            freed[name] = sum(1 for v in stamps if v < oldest[name] and v not in left)
        if self.files.local is not None and kept:
            # the latest manifest's and pinned ones': a reader of another kept manifest that has not
            # mapped its snapshot yet loads its view from the tables
            snapshots = {kept[-1], *(set(kept[:-1]) & pinned_versions(self.files))}
            prune(self.files.local / SNAPSHOT_DIR, lambda old: version_of(old) in snapshots)
        self.prune_raw([self._manifest_tables(number) for number in kept])
        return freed

    def compact(self, keep: int, run_id: str, exclusive: bool = True) -> dict:
        """``laminae compact``: start from the tables at the latest manifest's versions
        (``roll_back``), compact them; if that changed any, publish their versions as a new manifest
        with the same contents (its snapshot hard-linked from the last one); write the latest
        manifest's snapshot again if it is missing or damaged; clean up versions before the newest
        ``keep`` manifests. The caller holds the writer lease; ``exclusive``: the lease excludes
        other writers (not on object stores without one). A snapshot or cleanup that fails after
        publishing is a warning in the result: the manifest stands."""
        recovered = self.recover()
        latest = self.latest_manifest_version()
        if latest == 0:
            raise IndexConfigError(f"{self.root} holds no published index: build one with `laminae build`")
        text = self.files.read_text(f"{MANIFEST_DIR}/{latest:08d}.json")
        try:
            previous = json.loads(text or "")
            before = previous["tables"]
        except (ValueError, KeyError, TypeError):
            raise IndexConfigError(f"{self.root}/{MANIFEST_DIR}/{latest:08d}.json (the latest manifest) is "
                                   "damaged: run `laminae refresh` to publish a new one") from None
        rolled = self.roll_back(before, latest, exclusive)
        self.compact_tables()
        version = latest
        if any(self.table(name).version != v for name, v in before.items() if name in TABLES):
            extra = {k: v for k, v in previous.items() if k not in ("version", "run_id", "created_at", "tables")}
            version = self.publish(run_id, {**extra, "compacted_from": latest})
        result = {"manifest_version": version, "published": version != latest, "snapshot": "kept",
                  "rolled_back": rolled, "recovered": recovered, "warnings": []}
        try:
            if self.files.local is not None:
                problem = snapshot_problem(snapshot_dir(str(self.root), version))
                if version != latest and snapshot_problem(snapshot_dir(str(self.root), latest)) is None:
                    self.write_snapshot(version, same_as=latest)
                    result["snapshot"] = "linked"
                elif problem is not None:
                    self.write_snapshot(version)
                    result["snapshot"] = f"written again ({problem})"
        except (OSError, ValueError, MemoryError) as exc:  # the disk, damaged data
            result["snapshot"] = "not written"
            result["warnings"].append(f"manifest {version} is published, but its reader snapshot could not be "
                                      f"written ({type(exc).__name__}: {exc}); readers load the view from the "
                                      "tables; `laminae compact` tries again")
        try:
            result["versions_deleted"] = sum(self.clean_up(keep).values())
        except (OSError, ValueError, RuntimeError, IndexConfigError) as exc:  # LanceDB's I/O errors are RuntimeErrors
            result["versions_deleted"] = 0
            result["warnings"].append(f"manifest {version} is published, but older versions could not be cleaned "
                                      f"up ({type(exc).__name__}: {exc}); `laminae compact` tries again")
        return result

    def roll_back(self, tables: dict[str, int], number: int, exclusive: bool = True) -> dict[str, tuple[int, int]]:
        """Bring every committed table (``COMMITTED_TABLES``) back to the version manifest ``number``
        names (``tables``) where it has moved past it; returns ``{table: (from, to)}``. A table's
        later versions are writes no manifest published: of a run that was killed or failed (a
        later refresh does that work again), or a cleanup's compaction of the same rows. LanceDB's
        ``restore`` makes the named version the newest again, as crash recovery makes a database's
        uncommitted transactions invisible before its VACUUM runs. Only under an exclusive lease:
        elsewhere such versions may be a live writer's, so this refuses, naming the fix."""
        rolled: dict[str, tuple[int, int]] = {}
        for name in COMMITTED_TABLES:
            if name not in tables:
                continue
            tbl = self.table(name)
            wanted, now = int(tables[name]), tbl.version
            if now == wanted:
                continue
            if now < wanted or wanted not in {v["version"] for v in tbl.list_versions()}:
                raise IndexConfigError(f"{self.root}: table {name} is at version {now} and no longer holds version "
                                       f"{wanted}, which manifest {number} names: run `laminae refresh --index "
                                       f"{self.root}` to publish the tables as they are")
            if not exclusive:
                raise IndexConfigError(f"{self.root}: table {name} has versions past manifest {number} (a run that "
                                       "failed, was killed, or is writing now: this object store has no writer "
                                       "lease, so compact cannot tell). Run `laminae refresh --index "
                                       f"{self.root}` when no other writer runs; it publishes them")
            tbl.restore(wanted)
            rolled[name] = (now, wanted)
        if rolled:
            log.info("%s: started from manifest %d's versions of %s (their later versions were never published)",
                     self.root, number, ", ".join(rolled))
        return rolled

    def recover(self) -> dict[str, int]:
        """Clear what writers and readers that died left behind; the next writer calls this under
        its lease, so nothing it removes is in use: temporary snapshot folders (their writers'
        locks are gone, ``laminae.snapshots.remove_abandoned``: a reader rebuilding a snapshot
        holds its own), temporary files in ``_manifests/`` and the raw store, and ``LATEST`` when
        it does not name the newest manifest (a writer killed between the two writes)."""
        found = {"temporary_snapshots": 0, "temporary_files": 0, "latest_repaired": 0}
        if self.files.local is not None:
            root = self.files.local
            found["temporary_snapshots"] = remove_abandoned(root / SNAPSHOT_DIR)
            for folder in (root / MANIFEST_DIR, *sorted((root / "raw").glob("*"))):
                for tmp in folder.glob(".tmp-*") if folder.is_dir() else ():
                    tmp.unlink(missing_ok=True)
                    found["temporary_files"] += 1
        versions = self.manifest_versions()
        latest = self.files.read_text(f"{MANIFEST_DIR}/LATEST")
        if versions and (latest or "").strip() != str(versions[-1]):
            self.files.write_text(f"{MANIFEST_DIR}/LATEST", str(versions[-1]))
            found["latest_repaired"] = 1
        return found

    def _manifest_tables(self, number: int) -> dict[str, int]:
        text = self.files.read_text(f"{MANIFEST_DIR}/{number:08d}.json")
        try:
            return dict(json.loads(text or "")["tables"])
        except (ValueError, KeyError, TypeError):
            raise IndexConfigError(f"{self.root}/{MANIFEST_DIR}/{number:08d}.json is damaged, so the table "
                                   "versions it needs are unknown: nothing more was cleaned up. Move the file "
                                   "aside if that version is not needed") from None

    def prune_raw(self, versions: list[dict[str, int]]) -> int:
        """Delete raw-store files that no table version in ``versions`` refers to (a page's bytes
        in ``fetches``, a picture's or video's in ``components``), nor the tables' latest versions;
        returns how many. Keyframe and caption bytes a cache names are fetched or decoded again if
        a later run needs them. Only the writer calls this, under its lease, after publishing."""
        referenced: set[str] = set()
        for tables in [*versions, {}]:
            for name, columns in (("fetches", ["raw_key"]), ("components", ["image_key", "video_key"])):
                tbl = self.table(name)
                if name in tables:
                    tbl.checkout(tables[name])
                data = tbl.search().select(columns).limit(None).to_arrow()
                for column in columns:
                    referenced.update(k for k in data.column(column).to_pylist() if k)
        removed = 0
        for rel in self._raw_files():
            name = rel.rsplit("/", 1)[-1]
            if name not in referenced and not name.startswith(".tmp-"):
                self.files.delete(rel)
                removed += 1
                if self.files.local is not None:
                    with contextlib.suppress(OSError):  # a folder still holding other keys stays
                        (self.files.local / rel).parent.rmdir()
        return removed

    def _raw_files(self) -> list[str]:
        """Paths (relative to the root) of every file in the raw store."""
        if self.files.local is not None:
            root = self.files.local
            return [str(p.relative_to(root)) for p in (root / "raw").glob("*/*")]
        from pyarrow import fs

        base = self.files._base
        infos = self.files._fs.get_file_info(fs.FileSelector(f"{base}/raw", recursive=True, allow_not_found=True))
        return [i.path[len(base) + 1:] for i in infos if i.type == fs.FileType.File]

    # -- manifests -----------------------------------------------------------------------------
    def manifest_versions(self) -> list[int]:
        """Every manifest version published in ``_manifests/``, ascending."""
        names = self.files.list(MANIFEST_DIR)
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def latest_manifest_version(self) -> int:
        """The newest published version: ``LATEST``, or the newest manifest file where ``LATEST`` is
        behind it or damaged (a run killed between the two writes, a file garbled on disk)."""
        latest = self.files.read_text(f"{MANIFEST_DIR}/LATEST")
        number = int(latest.strip()) if latest is not None and latest.strip().isdigit() else 0
        versions = self.manifest_versions()
        return max(number, versions[-1] if versions else 0)

    def next_manifest_version(self) -> int:
        """The version the next manifest takes: the one after ``latest_manifest_version``. A writer
        decides it once, under its lease, when its ``runs`` row must name the manifest it publishes."""
        return self.latest_manifest_version() + 1

    def publish(self, run_id: str, extra: dict, version: int | None = None) -> int:
        """Write manifest ``version`` (default: ``next_manifest_version``) naming every table's
        current version, and point ``LATEST`` at it. The manifest file is created only if absent (a
        link on a local disk, ``If-None-Match`` on S3): two runs can never publish the same version."""
        version = self.next_manifest_version() if version is None else version
        meta = self.metadata() or {}
        manifest = {
            "version": version,
            "run_id": run_id,
            "created_at": datetime.now(UTC).isoformat(),
            "schema_version": SCHEMA_VERSION,
            "embedder": meta.get("embedder"),
            "serialization": meta.get("serialization", 1),
            "tables": {name: self.table(name).version for name in TABLES},
            **extra,
        }
        crash_point("publish")
        self._create(f"{MANIFEST_DIR}/{version:08d}.json", json.dumps(manifest, indent=2, default=str).encode())
        crash_point("publish:latest")
        try:
            self.files.write_text(f"{MANIFEST_DIR}/LATEST", str(version))
        except OSError as exc:  # published all the same: the newest manifest is the latest, LATEST is repaired
            log.warning("manifest %d is published, but %s/%s/LATEST could not be written (%s): the next writer "
                        "repairs it", version, self.root, MANIFEST_DIR, exc)
        return version

    def _create(self, rel: str, data: bytes) -> None:
        """Write a new file whole; ``IndexConfigError`` if it exists already."""
        taken = IndexConfigError(f"{self.root}/{rel} exists already: another writer published this version "
                                 "(writers take the index's writer lease; was this one run without it?)")
        if self.files.local is not None:
            target = self.files.local / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                crash_point("publish:manifest")
                os.link(tmp, target)  # fails if the target exists, unlike a rename
            except FileExistsError:
                raise taken from None
            finally:
                Path(tmp).unlink(missing_ok=True)
            return
        if self.root.startswith("s3://"):
            from botocore.exceptions import ClientError

            client, bucket, key = s3_object(self.root, rel)
            try:
                client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "PreconditionFailed":
                    raise taken from None
                raise
            return
        if self.files.exists(rel):  # gs://, abfs://: no conditional write here
            raise taken
        self.files.write_bytes(rel, data)
