"""File input and output that a hostile directory or output path cannot turn against the caller.

Every command that writes a file writes it through :func:`write_bytes` (or
:func:`write_text`), and every read of an untrusted directory (a panel
directory) goes through :func:`read_bytes`, :func:`read_json` or
:func:`snapshot`. The rules:

- **Writes cannot destroy.** The target is ``lstat``-ed first: anything that
  exists and is not a regular file (a symbolic link, a directory, a FIFO, a
  device node, a socket) is refused with :class:`SafeIOError` (one line; the
  commands exit 2). The data goes to a new temporary file in the same
  directory, created with ``O_EXCL | O_NOFOLLOW``, which is then renamed over
  the target (``os.replace`` replaces a directory entry and never writes
  through one), so a reader sees the old file or the new one, never half.
- **No symbolic link is followed below ``root``.** ``root`` (by default the
  target's own directory) is the caller's choice and is opened as given;
  every directory between it and the file is opened with ``O_NOFOLLOW``
  relative to its parent's descriptor (``openat``), so a link planted in an
  output directory (``figures``, ``verified``, ``report.md`` as a link) is
  refused, never followed out of it. ``..`` in a path below ``root`` is refused.
- **Reads open regular files only**, with ``O_NONBLOCK | O_NOFOLLOW`` after an
  ``lstat``: a FIFO, a device or a link is refused before any byte is read,
  and an open never blocks. Every read has a size limit, checked on the open
  descriptor and again while reading (a file that grows is cut off).
- **JSON has a depth limit** (:data:`MAX_DEPTH`); a nesting the parser
  cannot take (``RecursionError``) or a document too large for memory
  (``MemoryError``) is a :class:`SafeIOError`, never a traceback.

Text that came from a file and is printed goes through :func:`escape`:
printable ASCII only, everything else as Python escapes, truncated.

This module imports the standard library and ``exact.errors`` only (its
:class:`SafeIOError` is a ``UserInputError``), so every producer may use it
(``fileio.bracketwriter``, ``oracles``, ``proofs_checks``, the float tier;
``tests/test_architecture.py``).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
from pathlib import Path

from exact.errors import UserInputError

__all__ = ["SafeIOError", "MAX_DEPTH", "write_bytes", "write_text", "make_dirs", "check_target",
           "check_output_dir", "missing_reason", "tensor_digests", "read_f64_tensors",
           "read_bytes", "read_json", "snapshot", "list_dir", "file_kind", "json_depth", "escape"]

#: Deepest JSON nesting accepted (the project's documents nest about 6 deep).
MAX_DEPTH = 64
#: Characters of a string from a file kept by :func:`escape`.
ESCAPE_CHARS = 160
#: Entries of one directory listed at most (:func:`list_dir`).
MAX_ENTRIES = 1_000_000
_CHUNK = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class SafeIOError(UserInputError):
    """A path refused or a file unreadable: the message is one line (exit 2, ``ExitCode.MALFORMED``)."""


def escape(text, limit: int = ESCAPE_CHARS) -> str:
    """``text`` as printable ASCII (others as Python escapes), cut to ``limit`` characters with ``...``.

    >>> escape("a\\x1b[2Kb\\nc")
    'a\\\\x1b[2Kb\\\\nc'
    >>> escape("x" * 10, 6)
    'xxx...'
    """
    s = str(text)
    out = "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in s[:limit + 1])
    return out if len(out) <= limit else out[:max(0, limit - 3)] + "..."


def file_kind(mode: int) -> str:
    """A file type in words, for messages."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def _split(path, root) -> tuple[Path, list[str]]:
    """(root, the names from root down to the file); ``..`` below root is refused."""
    path = Path(path)
    if root is None:
        return (path.parent, [path.name]) if path.name not in ("", ".", "..") else (path, [])
    root = Path(root)
    try:
        rel = path.relative_to(root) if path.is_absolute() == root.is_absolute() else None
    except ValueError:
        rel = None
    if rel is None:
        raise SafeIOError(f"{escape(path)}: not inside {escape(root)}")
    parts = list(rel.parts)
    if ".." in parts:
        raise SafeIOError(f"{escape(path)}: '..' in a path below {escape(root)}")
    return root, parts


def _fail(path, e: OSError, verb: str):
    if e.errno == errno.ELOOP:
        return SafeIOError(f"{escape(path)}: refusing to {verb} through a symbolic link")
    if e.errno == errno.ENOTDIR:
        return SafeIOError(f"{escape(path)}: a path component is not a directory")
    return SafeIOError(f"{escape(path)}: cannot {verb}: {e.strerror or type(e).__name__}")


def _walk(root: Path, dirs: list[str], path, create: bool) -> int:
    """A descriptor of ``root/dirs...``: root opened as given, each name below it with ``O_NOFOLLOW``."""
    try:
        if create:
            os.makedirs(root, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as e:
        raise _fail(root, e, "open the directory") from None
    for name in dirs:
        try:
            if create:
                try:
                    os.mkdir(name, dir_fd=fd)
                except FileExistsError:
                    pass
            nfd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
        except OSError as e:
            kind = _lkind(fd, name) if e.errno in (errno.ELOOP, errno.ENOTDIR) else None
            os.close(fd)
            if kind:
                raise SafeIOError(f"{escape(path)}: {escape(name)} is {kind}, not a directory: refused") from None
            raise _fail(path, e, "open the directory") from None
        os.close(fd)
        fd = nfd
    return fd


def _lkind(dfd: int, name: str) -> str | None:
    try:
        return file_kind(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return None


def make_dirs(path, *, root=None) -> Path:
    """Create the directory ``path`` (and those between ``root`` and it) without following a link below root."""
    r, parts = _split(path, root if root is not None else Path(path))
    os.close(_walk(r, parts, path, create=True))
    return Path(path)


def _check_entry(dfd: int, name: str, path) -> None:
    kind = _lkind(dfd, name)
    if kind is not None and kind != "a regular file":
        raise SafeIOError(f"{escape(path)} exists and is {kind}: refusing to replace it")


def check_target(path, *, root=None, parent_exists: bool = False) -> None:
    """Refuse, before any work is done, an output path that :func:`write_bytes` would refuse. A directory
    that does not exist yet (root, or one below it) is one the write creates: nothing below it to refuse;
    every directory that exists on the way is opened as the write opens it (no link followed below root).
    With ``parent_exists`` the file's directory must exist already (an output FILE option: a typo in its
    directory is an error, not a directory chain to create)."""
    r, parts = _split(path, root)
    if not parts:
        raise SafeIOError(f"{escape(path)}: not a file name")
    if parent_exists:
        parent = Path(path).parent
        try:
            info = os.stat(parent)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise SafeIOError(f"{escape(path)}: its directory is a symbolic link loop") from None
            if e.errno == errno.ENOTDIR:
                raise SafeIOError(f"{escape(path)}: a component of {escape(parent)} is not a directory") from None
            raise SafeIOError(f"{escape(path)}: the directory {escape(parent)} does not exist") from None
        if not stat.S_ISDIR(info.st_mode):
            raise SafeIOError(f"{escape(path)}: {escape(parent)} is {file_kind(info.st_mode)}, not a directory")
    if not r.exists():         # a directory the write will create
        return
    dirs = parts[:-1]
    k = len(dirs)              # the directories below root that exist (lexists: a link counts, and is refused)
    while k and not os.path.lexists(os.path.join(r, *dirs[:k])):
        k -= 1
    fd = _walk(r, dirs[:k], path, create=False)
    try:
        if k == len(dirs):
            _check_entry(fd, parts[-1], path)
    finally:
        os.close(fd)


def check_output_dir(path) -> None:
    """Refuse, before any work, an output directory that exists and is not a directory itself: a symbolic
    link (to a directory or not: a link planted at ``DIR/study`` would send every output to its target),
    a FIFO, a device or a regular file. One line (:class:`SafeIOError`)."""
    try:
        info = os.lstat(path)
    except OSError:            # missing, or above it a loop: the write (or the read before it) names it
        return
    if not stat.S_ISDIR(info.st_mode):
        raise SafeIOError(f"{escape(path)} exists and is {file_kind(info.st_mode)}, not a directory: "
                          "refusing to write into it")


def missing_reason(path) -> str:
    """Why ``path`` cannot be opened, in words: "does not exist", "is a symbolic link loop", "is a dangling
    symbolic link" (for a message about a path that ``Path.exists`` calls missing)."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "is a symbolic link loop"
        if os.path.islink(path):
            return "is a dangling symbolic link"
        if e.errno == errno.ENOTDIR:
            return "has a path component that is not a directory"
        return "does not exist"
    return "exists"


def write_bytes(path, data: bytes, *, root=None) -> Path:
    """Write ``data`` to ``path`` atomically; refuse a target that exists and is not a regular file, and any
    symbolic link between ``root`` (default: the target's directory) and the target. Returns ``path``."""
    r, parts = _split(path, root)
    if not parts:
        raise SafeIOError(f"{escape(path)}: not a file name")
    fd = _walk(r, parts[:-1], path, create=True)
    name = parts[-1]
    tmp = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
    try:
        _check_entry(fd, name, path)
        try:
            wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=fd)
        except OSError as e:
            raise _fail(path, e, "write") from None
        try:
            with os.fdopen(wfd, "wb") as f:
                f.write(data)
            _check_entry(fd, name, path)         # a swap while writing is refused too
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException as e:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            if isinstance(e, OSError) and not isinstance(e, SafeIOError):
                raise _fail(path, e, "write") from None
            raise
    finally:
        os.close(fd)
    return Path(path)


def write_text(path, text: str, *, root=None) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), root=root)


def _open_regular(path, root) -> tuple[int, int]:
    """(descriptor, size) of a regular file, opened without following a link and without blocking."""
    r, parts = _split(path, root)
    if not parts:
        raise SafeIOError(f"{escape(path)}: not a file name")
    dfd = _walk(r, parts[:-1], path, create=False)
    try:
        kind = _lkind(dfd, parts[-1])
        if kind is None:
            raise SafeIOError(f"{escape(path)} is missing")
        if kind != "a regular file":
            raise SafeIOError(f"{escape(path)} is {kind}, not a regular file: refused")
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
        except OSError as e:
            raise _fail(path, e, "read") from None
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise SafeIOError(f"{escape(path)} is {file_kind(st.st_mode)}, not a regular file: refused")
    return fd, st.st_size


def _chunks(fd: int, size: int, limit: int, path):
    if size > limit:
        raise SafeIOError(f"{escape(path)} is {size} bytes, more than the limit of {limit}")
    got = 0
    while True:
        b = os.read(fd, min(_CHUNK, limit + 1 - got))
        if not b:
            return
        got += len(b)
        if got > limit:
            raise SafeIOError(f"{escape(path)} holds more than the limit of {limit} bytes")
        yield b


def read_bytes(path, *, limit: int, root=None) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``), see the module docstring."""
    fd, size = _open_regular(path, root)
    try:
        return b"".join(_chunks(fd, size, limit, path))
    except MemoryError:
        raise SafeIOError(f"{escape(path)}: out of memory reading it") from None
    except OSError as e:
        raise _fail(path, e, "read") from None
    finally:
        os.close(fd)


def snapshot(path, dest, *, limit: int, root=None) -> str:
    """Copy the regular file ``path`` (at most ``limit`` bytes) to the new file ``dest``; its SHA-256.

    Later readers read the copy, so what they read is what was hashed."""
    fd, size = _open_regular(path, root)
    h = hashlib.sha256()
    try:
        with open(dest, "xb") as out:
            for b in _chunks(fd, size, limit, path):
                h.update(b)
                out.write(b)
    except OSError as e:
        raise _fail(path, e, "read") from None
    finally:
        os.close(fd)
    return h.hexdigest()


#: The JSON header of a safetensors file read by :func:`tensor_digests`, at most (the bracket format's limit).
HEADER_BYTES = 16 * 2**20


def _pread(fd: int, n: int, at: int, path) -> bytes:
    """Exactly ``n`` bytes at offset ``at`` (a file cut short is a :class:`SafeIOError`)."""
    data = os.pread(fd, n, at)
    if len(data) != n:
        raise SafeIOError(f"{escape(path)}: truncated file")
    return data


def _tensor_spans(fd: int, size: int, path, names, limit: int) -> tuple[dict, dict]:
    """The parsed header of a safetensors file and ``{name: (dtype, shape, start, stop)}`` (absolute byte
    offsets) of the tensors ``names`` it has, each entry checked against the file's size."""
    if size > limit:
        raise SafeIOError(f"{escape(path)} is {size} bytes, more than the limit of {limit}")
    if size < 8:
        raise SafeIOError(f"{escape(path)}: not a safetensors file (no header length)")
    n = int.from_bytes(_pread(fd, 8, 0, path), "little")
    if n > HEADER_BYTES or 8 + n > size:
        raise SafeIOError(f"{escape(path)}: not a safetensors file (a header of {n} bytes)")
    try:
        header = json.loads(_pread(fd, n, 8, path))
        json_depth(header)
    except (ValueError, RecursionError, MemoryError, SafeIOError) as e:
        why = "JSON nested too deep" if isinstance(e, (RecursionError, SafeIOError)) else type(e).__name__
        raise SafeIOError(f"{escape(path)}: not a safetensors file (header: {why})") from None
    if not isinstance(header, dict):
        raise SafeIOError(f"{escape(path)}: not a safetensors file (the header is not an object)")
    spans = {}
    for name in names:
        info = header.get(name)
        if not isinstance(info, dict):
            continue
        dtype, shape, span = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if (not isinstance(dtype, str) or not isinstance(shape, list) or not isinstance(span, list)
                or len(span) != 2 or any(type(x) is not int or x < 0 for x in shape + span)
                or not span[0] <= span[1] <= size - 8 - n):
            raise SafeIOError(f"{escape(path)}: tensor {escape(name, 40)} has a malformed entry")
        count = 1
        for x in shape:
            count *= x
        if dtype == "F64" and span[1] - span[0] != 8 * count:
            raise SafeIOError(f"{escape(path)}: tensor {escape(name, 40)} has {span[1] - span[0]} bytes "
                              f"for shape {shape}")
        spans[name] = (dtype, list(shape), 8 + n + span[0], 8 + n + span[1])
    return header, spans


def tensor_digests(path, names, *, limit: int, root=None) -> dict:
    """``{name: {"dtype", "shape", "sha256"}}`` of the tensors ``names`` of the safetensors file ``path``
    (those it has), read as bracket files are read: a regular file only (see :func:`read_bytes`) of at most
    ``limit`` bytes, the header (at most :data:`HEADER_BYTES`, JSON depth limited) first, then each named
    tensor's bytes in chunks of 1 MiB, hashed and dropped: memory stays a few MiB whatever the file holds
    besides. The SHA-256 is that of the tensor's bytes as stored (little-endian for F64)."""
    fd, size = _open_regular(path, root)
    try:
        _, spans = _tensor_spans(fd, size, path, names, limit)
        out = {}
        for name, (dtype, shape, lo, hi) in spans.items():
            h = hashlib.sha256()
            for at in range(lo, hi, _CHUNK):
                h.update(_pread(fd, min(_CHUNK, hi - at), at, path))
            out[name] = {"dtype": dtype, "shape": shape, "sha256": h.hexdigest()}
        return out
    except OSError as e:
        raise _fail(path, e, "read") from None
    finally:
        os.close(fd)


def read_f64_tensors(path, names, *, limit: int, root=None) -> tuple[dict, dict]:
    """The header of the safetensors file ``path`` and ``{name: bytes}`` of those of the tensors ``names``
    that it stores as F64 (little-endian), read as :func:`tensor_digests` reads: only these tensors' bytes
    are held, whatever else the file holds."""
    fd, size = _open_regular(path, root)
    try:
        header, spans = _tensor_spans(fd, size, path, names, limit)
        out = {}
        for name, (dtype, shape, lo, hi) in spans.items():
            if dtype == "F64":
                out[name] = (shape, _pread(fd, hi - lo, lo, path))
        return header, out
    except OSError as e:
        raise _fail(path, e, "read") from None
    finally:
        os.close(fd)


def json_depth(doc, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of a parsed JSON value (iterative); ``SafeIOError`` past ``limit``."""
    depth, stack = 0, [(doc, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            if d > limit:
                raise SafeIOError(f"JSON nested deeper than {limit} levels")
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in (x.values() if isinstance(x, dict) else x))
    return depth


def read_json(path, *, limit: int, max_depth: int = MAX_DEPTH, root=None):
    """A JSON document from the regular file ``path`` (size and depth limited; one-line errors)."""
    data = read_bytes(path, limit=limit, root=root)
    try:
        doc = json.loads(data)
    except RecursionError:
        raise SafeIOError(f"{escape(path)}: JSON nested too deep") from None
    except MemoryError:
        raise SafeIOError(f"{escape(path)}: out of memory parsing it") from None
    except ValueError as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SafeIOError(f"{escape(path)}: not JSON ({escape(why, 80)})") from None
    try:
        json_depth(doc, max_depth)
    except SafeIOError as e:
        raise SafeIOError(f"{escape(path)}: {e}") from None
    return doc


def list_dir(path, *, root=None, suffix: str = "", limit: int = MAX_ENTRIES) -> list[str]:
    """The sorted names in the directory ``path`` ending in ``suffix`` (no link followed below root);
    ``[]`` when it does not exist."""
    r, parts = _split(path, root if root is not None else Path(path))
    if root is not None and parts:
        try:
            pfd = _walk(r, parts[:-1], path, create=False)
        except SafeIOError:
            return []
        kind = _lkind(pfd, parts[-1])
        os.close(pfd)
        if kind is None:
            return []
    fd = _walk(r, parts, path, create=False)
    try:
        names = []
        with os.scandir(fd) as it:
            for e in it:
                if e.name.endswith(suffix):
                    names.append(e.name)
                    if len(names) > limit:
                        raise SafeIOError(f"{escape(path)} holds more than {limit} entries")
    finally:
        os.close(fd)
    return sorted(names)
