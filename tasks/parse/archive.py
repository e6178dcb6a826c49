"""Zipped documents (DOCX, PPTX, XLSX, EPUB) checked before any library unpacks them.

Reads a zip's central directory; writes nothing. Python's ``zipfile`` stops reading a member at the
size its directory entry declares, so bounding the declared sizes bounds what any library that
opens the archive afterwards can inflate: a zip bomb is refused here, as an error row, before
python-docx, python-pptx, openpyxl or pymupdf see it.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from laminae.tasks.parse.document import ParseError

MAX_MEMBERS = 20_000  # members of one document's zip (a large workbook or e-book holds a few hundred)


def check_zip(body: bytes, fmt: str, max_bytes: int) -> zipfile.ZipFile:
    """The document's zip, open, once its members are counted and their unpacked sizes summed;
    ``ParseError`` (``unparsable_<fmt>``, ``zip_bomb``) for a damaged or oversized one."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise ParseError(f"not a readable {fmt.upper()} file (a zip archive): {exc}", f"unparsable_{fmt}") from None
    if len(members) > MAX_MEMBERS:
        archive.close()
        raise ParseError(f"the archive holds {len(members)} members, more than {MAX_MEMBERS}", "zip_bomb")
    unpacked = sum(m.file_size for m in members)
    if unpacked > max_bytes:
        archive.close()
        raise ParseError(f"the archive unpacks to {unpacked} bytes ({len(body)} packed), more than {max_bytes} "
                         "(raise LAMINAE_PARSE__MAX_UNZIPPED_BYTES to index it)", "zip_bomb")
    return archive


def read_member(archive: zipfile.ZipFile, name: str, fmt: str) -> bytes:
    """One member's bytes; ``ParseError`` when it is missing or damaged."""
    try:
        return archive.read(name)
    except KeyError:
        raise ParseError(f"the {fmt.upper()} file has no {name}", f"unparsable_{fmt}") from None
    except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise ParseError(f"{name} in the {fmt.upper()} file cannot be unpacked: {exc}", f"unparsable_{fmt}") from None
