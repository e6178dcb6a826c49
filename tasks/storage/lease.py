"""One writer per index: the exclusive writer lease every build, refresh, re-embed and compaction holds.

Reads and writes one file at the index root, ``_writer.lock``, holding who has the lease (pid,
host, run id, command, start time) as JSON. How it is made exclusive depends on the storage, and
in both cases the storage itself decides, not a protocol of ours:

- **A local directory**: an advisory ``flock`` on the file. The kernel drops it when the holder's
  process ends for any reason (SIGKILL included), so a dead holder never leaves a lease behind
  and no heartbeat or pid check is needed; the JSON is only there to name the holder.
- **S3** (and S3-compatible servers): conditional writes. The lease object is created with
  ``If-None-Match: *`` (one creator wins), renewed by a heartbeat thread with ``If-Match`` on its
  last ETag, and released with a conditional delete. A holder that stops renewing (killed, machine
  lost) is taken over once the object is older than ``$LAMINAE_LEASE_TTL`` seconds (default 60):
  age is the server's ``Date`` minus the object's ``Last-Modified``, both the server's clock, and
  the takeover is itself an ``If-Match`` write, so two takers cannot both win. A holder whose
  renewal is refused has lost the lease: ``WriterLease.check`` raises before anything is published.
- Other object stores (``gs://``, ``abfs://``) have no lease yet: a warning says so.

A process that holds the lease may take it again (the command line takes it before Prefect starts,
so that a second writer fails at once; the flow inside takes it again).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from laminae.schemas.errors import LaminaeError
from laminae.schemas.storage import is_remote
from laminae.tasks.storage.versions import IndexConfigError, s3_object

log = logging.getLogger("laminae.lease")

LEASE_FILE = "_writer.lock"
TTL_ENV = "LAMINAE_LEASE_TTL"
POLL_SECONDS = 0.5  # how often a waiting writer tries again


class LeaseHeldError(IndexConfigError):
    """Another writer holds the index; the message names it and says what to do."""

    def __init__(self, message: str, holder: dict) -> None:
        super().__init__(message)
        self.holder = holder


class LeaseLostError(LaminaeError, RuntimeError):
    """This writer's lease was taken over (its renewals failed for longer than the TTL): nothing
    more may be written or published."""


def lease_ttl() -> float:
    value = os.environ.get(TTL_ENV, "60")
    try:
        ttl = float(value)
    except ValueError:
        raise IndexConfigError(f"{TTL_ENV}={value!r} is not a number of seconds (e.g. 60)") from None
    if ttl < 3:
        raise IndexConfigError(f"{TTL_ENV}={value!r}: the lease TTL must be at least 3 seconds")
    return ttl


def _holder(run_id: str | None, command: str) -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "run_id": run_id, "command": command,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds")}


def describe(holder: dict) -> str:
    if not holder:
        return "another writer (it has not written its name yet)"
    return (f"{holder.get('command', 'a writer')} (pid {holder.get('pid')} on {holder.get('host')}, "
            f"run {holder.get('run_id') or '-'}, since {holder.get('started_at')})")


def _held_message(root: str, holder: dict, waited: float | None) -> str:
    waiting = f" and did not free it within {waited:g} s" if waited else ""
    return (f"{root} is being written by {describe(holder)}{waiting}. One writer at a time: wait for "
            "it to finish (or pass --wait [SECONDS] to wait for it), or stop it; a holder that died "
            "leaves no lease behind" + (" (on object storage, after the lease TTL)" if is_remote(root) else ""))


class _LocalLock:
    def __init__(self, root: str) -> None:
        self.path = Path(root) / LEASE_FILE
        self.fd: int | None = None

    def try_acquire(self, holder: dict) -> dict | None:
        """None when taken, else the holder's record."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return _parse(os.pread(fd, 65536, 0))
            finally:
                os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        os.fsync(fd)
        self.fd = fd
        return None

    def check(self) -> None:
        pass  # a flock cannot be taken from a live process

    def rename(self, holder: dict) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, json.dumps(holder).encode(), 0)

    def release(self) -> None:
        if self.fd is None:
            return
        import fcntl

        os.ftruncate(self.fd, 0)  # no name left behind; the lock goes with the descriptor
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


class _S3Lock:
    def __init__(self, root: str) -> None:
        self.client, self.bucket, self.key = s3_object(root, LEASE_FILE)
        self.ttl = lease_ttl()
        self.etag: str | None = None
        self.lost: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _code(self, exc: Exception) -> str:
        return getattr(exc, "response", {}).get("Error", {}).get("Code", "")

    def try_acquire(self, holder: dict) -> dict | None:
        from botocore.exceptions import ClientError

        body = json.dumps(holder).encode()
        try:
            self.etag = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body, IfNoneMatch="*")["ETag"]
        except ClientError as exc:
            if self._code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
        else:
            self._start_heartbeat(body)
            return None
        try:
            current = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if self._code(exc) in ("NoSuchKey", "404"):
                return {}  # released meanwhile: the next try creates it
            raise
        record = _parse(current["Body"].read())
        now = current["ResponseMetadata"]["HTTPHeaders"].get("date")
        age = (_http_time(now) - current["LastModified"]).total_seconds() if now else 0.0
        if age <= self.ttl:
            return record
        try:  # the holder stopped renewing: take it over, unless another taker already did
            self.etag = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body,
                                               IfMatch=current["ETag"])["ETag"]
        except ClientError as exc:
            if self._code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"):
                raise
            return record
        log.warning("took over the writer lease of %s from %s: not renewed for %.0f s", self.key,
                    describe(record), age)
        self._start_heartbeat(body)
        return None

    def rename(self, holder: dict) -> None:
        self.body = json.dumps(holder).encode()  # the next heartbeat writes it

    def _start_heartbeat(self, body: bytes) -> None:
        self._beat = threading.Thread(target=self._heartbeat, args=(body,), name="laminae-lease", daemon=True)
        self._beat.start()

    def _heartbeat(self, body: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        self.body = body
        while not self._stop.wait(self.ttl / 4):
            try:
                self.etag = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self.body,
                                                   IfMatch=self.etag)["ETag"]
            except ClientError as exc:
                if self._code(exc) in ("PreconditionFailed", "NoSuchKey"):
                    self.lost = f"the lease object was taken over or removed ({self._code(exc)})"
                    log.error("writer lease of s3://%s/%s lost: %s", self.bucket, self.key, self.lost)
                    return
                log.warning("writer lease renewal failed (will retry): %s", exc)
            except BotoCoreError as exc:  # a network hiccup: the next beat retries within the TTL
                log.warning("writer lease renewal failed (will retry): %s", exc)

    def check(self) -> None:
        if self.lost:
            raise LeaseLostError(f"s3://{self.bucket}/{self.key}: {self.lost}; this run publishes nothing")

    def release(self) -> None:
        from botocore.exceptions import ClientError

        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=10)
        if self.etag is None or self.lost:
            return
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self.etag)
        except ClientError as exc:
            log.warning("writer lease of s3://%s/%s not released (%s): the next writer takes it after %g s",
                        self.bucket, self.key, exc, self.ttl)
        self.etag = None


class _NoLock:
    def try_acquire(self, holder: dict) -> dict | None:
        return None

    def rename(self, holder: dict) -> None:
        pass

    def check(self) -> None:
        pass

    def release(self) -> None:
        pass


def _parse(data: bytes) -> dict:
    try:
        record = json.loads(data or b"{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _http_time(value: str) -> datetime:
    from email.utils import parsedate_to_datetime

    return parsedate_to_datetime(value)


class WriterLease:
    """The writer lease of one index, held between ``acquire`` and ``release``."""

    def __init__(self, root: str, lock) -> None:
        self.root = root
        self._lock = lock
        self.depth = 0

    def check(self) -> None:
        """Raise ``LeaseLostError`` if the lease was lost (object storage only)."""
        self._lock.check()

    @property
    def exclusive(self) -> bool:
        """Whether the lease keeps other writers out (not on object stores without one)."""
        return not isinstance(self._lock, _NoLock)


_held: dict[str, WriterLease] = {}
_held_guard = threading.Lock()


def _key(root: str) -> str:
    return root.rstrip("/") if is_remote(root) else str(Path(root).resolve())


def _lock_for(root: str):
    if not is_remote(root):
        return _LocalLock(root)
    if root.startswith("s3://"):
        return _S3Lock(root)
    log.warning("%s: no writer lease on this object store (local directories and s3:// only): make sure "
                "one build or refresh at a time writes it", root)
    return _NoLock()


def acquire(root: str, run_id: str | None = None, command: str = "laminae", wait: float | None = None) -> WriterLease:
    """Take the writer lease of ``root``: at once, or within ``wait`` seconds (``float('inf')``: as
    long as it takes); raises ``LeaseHeldError`` naming the holder otherwise."""
    key = _key(root)
    with _held_guard:
        lease = _held.get(key)
        if lease is not None:
            lease.depth += 1
            if run_id:  # the command line took it; the flow inside names its run
                lease._lock.rename(_holder(run_id, command))
            return lease
    lock = _lock_for(key)
    holder = _holder(run_id, command)
    deadline = None if wait is None else time.monotonic() + wait
    announced = False
    while True:
        record = lock.try_acquire(holder)
        if record is None:
            break
        if deadline is None or time.monotonic() >= deadline:
            raise LeaseHeldError(_held_message(root, record, wait), record)
        if not announced:
            log.info("waiting for %s to finish writing %s", describe(record), root)
            announced = True
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
    lease = WriterLease(key, lock)
    lease.depth = 1
    with _held_guard:
        _held[key] = lease
    return lease


def release(lease: WriterLease) -> None:
    with _held_guard:
        lease.depth -= 1
        if lease.depth > 0:
            return
        _held.pop(lease.root, None)
    lease._lock.release()


@contextmanager
def writer_lease(root: str, run_id: str | None = None, command: str = "laminae",
                 wait: float | None = None) -> Iterator[WriterLease]:
    """``acquire`` … ``release`` around a block."""
    lease = acquire(root, run_id, command, wait)
    try:
        yield lease
    finally:
        release(lease)


def holder_of(root: str) -> dict | None:
    """The current holder's record, or None when the lease is free (local directories: a probe that
    takes and gives back the lock; object storage: the lease object, if any)."""
    key = _key(root)
    if key in _held:
        return _holder(None, "this process")
    lock = _lock_for(key)
    if isinstance(lock, _LocalLock):
        record = lock.try_acquire({})
        if record is None:
            lock.release()
        return record
    if isinstance(lock, _S3Lock):
        from botocore.exceptions import ClientError

        try:
            return _parse(lock.client.get_object(Bucket=lock.bucket, Key=lock.key)["Body"].read())
        except ClientError:
            return None
    return None
