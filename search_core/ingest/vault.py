"""Read a vault (a folder of .md notes, or a BEIR corpus.jsonl) into Notes, reporting what it skipped."""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.ingest.note import Note, Section
from search_core.ingest.parse import content_hash, parse_note

MAX_NOTE_BYTES = 5 * 1024 * 1024   # the largest real note we know is 300 KB; 5 MB is a pasted dump
SKIP_DIRS = {".git", ".obsidian", ".trash", ".stversions", "node_modules", "__pycache__"}


@dataclass(frozen=True)
class VaultFile:
    note_id: str
    path: Path
    size: int
    mtime_ns: int
    vault: str | None = None      # the vault's real path: read_note checks the file it opened is inside it


OUTSIDE_LINK = ("symbolic link to a file outside the vault ({target}); not indexed: a link could put any "
                "file on this machine (a key, a password file) into search results and an agent's context. "
                "Copy or move the note into the vault to index it")


def _inside(real_root: str, real: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _opened_path(fd: int) -> str | None:
    """The real path of the file an open descriptor reads (Linux /proc), or None where it cannot be told."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


def note_id_for(root: Path, path: Path) -> str:
    rel = path.relative_to(root).as_posix()
    return rel[:-3] if rel.lower().endswith(".md") else rel


def _stat_problem(e: OSError) -> str:
    """Why a vault entry cannot be read, in words (the errno names are what users search for)."""
    if e.errno == errno.ELOOP:
        return "symbolic link loop (Too many levels of symbolic links); not indexed"
    if e.errno == errno.ENOENT:
        return "dangling symbolic link (its target does not exist); not indexed"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied; not indexed (make it readable to index it)"
    return f"cannot be read ({e.strerror or e}); not indexed"


def list_vault(root: str | Path, skipped: list | None = None) -> list[VaultFile]:
    """Every regular .md file under root. Anything else named .md (a pipe, a socket, a device, a symlink
    loop, a dangling link, a link to a file outside the vault) and every symlinked folder is reported in
    `skipped`, never opened: a read from a named pipe blocks forever, following folder links can loop, and a
    synced vault's `notes.md -> ~/.ssh/id_ed25519` would serve the key to whoever searches. A link to a
    file inside the vault is indexed."""
    root = Path(root)
    if not root.exists():
        raise SearchCoreError(f"vault {root} does not exist; pass the folder that holds your .md notes")
    if not root.is_dir():
        raise SearchCoreError(f"vault {root} is a file, not a folder; pass the folder that holds your .md notes")
    skipped = skipped if skipped is not None else []
    real_root = os.path.realpath(root)
    files = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: skipped.append(
            Skipped(str(e.filename), f"folder {_stat_problem(e)}"))):
        keep = []
        for d in sorted(dirnames):
            if d in SKIP_DIRS or d.startswith("."):
                continue
            if os.path.islink(os.path.join(dirpath, d)):
                skipped.append(Skipped(str(Path(dirpath) / d), "symlinked folder; not followed (it could loop or "
                                       "leave the vault); link the notes themselves or move the folder in"))
                continue
            keep.append(d)
        dirnames[:] = keep
        # note ids from strings, one relpath per folder: pathlib per file was a third of a no-op update's
        # 0.35 s vault listing on johngrib's 974 notes
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        for name in sorted(filenames):
            if name.lower().endswith(".md") and not name.startswith("."):
                full = os.path.join(dirpath, name)
                try:
                    st = os.stat(full)
                except OSError as e:
                    p = Path(full)
                    skipped.append(Skipped(str(p), _stat_problem(e)))
                    continue
                p = Path(full)
                if not stat.S_ISREG(st.st_mode):
                    kind = ("named pipe" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode)
                            else "device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "folder"
                            if stat.S_ISDIR(st.st_mode) else "special file")
                    skipped.append(Skipped(str(p), f"a {kind}, not a regular file; not indexed"))
                    continue
                if os.path.islink(full):
                    target = os.path.realpath(full)
                    if not _inside(real_root, target):
                        skipped.append(Skipped(str(p), OUTSIDE_LINK.format(target=target)))
                        continue
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                files.append(VaultFile(rel[:-3], p, st.st_size, st.st_mtime_ns, real_root))
    return files


class OutsideVault(Exception):
    """The file opened is not inside the vault (a link was swapped in after the vault was listed)."""


def _read_capped(path: Path, vault: str | None = None) -> bytes:
    """Read a file that was regular when listed. O_NONBLOCK so a file swapped for a pipe since then cannot
    block; fstat re-checks type and size on the open descriptor; the file the descriptor reads is checked to
    be inside `vault` (a note swapped for a link to outside since the listing); never reads past the cap."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        opened = _opened_path(fd) if vault is not None else None
        if opened is not None and not _inside(vault, opened):
            raise OutsideVault(opened)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_NOTE_BYTES + 1)
    finally:
        os.close(fd)


def read_note(vf: VaultFile) -> Note | Skipped:
    """Parse one file; binary, oversized or unreadable files are skipped with a reason, bad UTF-8 is kept with a warning."""
    if vf.size > MAX_NOTE_BYTES:
        return Skipped(str(vf.path), f"{vf.size / 1e6:.1f} MB is over the {MAX_NOTE_BYTES // 2**20} MB note limit; "
                                     "split the note or move it out of the vault")
    try:
        raw = _read_capped(vf.path, vf.vault)
    except OSError as e:
        return Skipped(str(vf.path), _stat_problem(e))
    except OutsideVault as e:
        return Skipped(str(vf.path), OUTSIDE_LINK.format(target=e.args[0]))
    if len(raw) > MAX_NOTE_BYTES:
        return Skipped(str(vf.path), f"grew past the {MAX_NOTE_BYTES // 2**20} MB note limit while being read; "
                                     "split the note or move it out of the vault")
    if b"\x00" in raw[:8192]:
        return Skipped(str(vf.path), "binary file with a .md name (NUL bytes); not indexed")
    warnings = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        text = raw.decode("utf-8", errors="replace")
        warnings.append(f"not valid UTF-8 (first bad byte at offset {e.start}); "
                        "indexed with U+FFFD replacement characters; re-save the file as UTF-8")
    text = text.lstrip("\ufeff")
    return parse_note(vf.note_id, text, content_hash(raw), tuple(warnings))


def is_beir(path: str | Path) -> bool:
    p = Path(path)
    return (p.is_dir() and (p / "corpus.jsonl").exists()) or (p.is_file() and p.name.endswith(".jsonl"))


def is_korquad(path: str | Path) -> bool:
    return Path(path).is_file() and Path(path).suffix == ".json"


def read_korquad(path: str | Path) -> tuple[list[Note], list[Skipped]]:
    """KorQuAD/SQuAD JSON read as it is: each paragraph is a note `AAA-PP`, titled by its article."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise SearchCoreError(f"{p} is not a KorQuAD/SQuAD JSON file (data[].paragraphs[]): {e}") from None
    notes = []
    for ai, article in enumerate(data):
        title = str(article.get("title", "")).replace("_", " ")
        for pi, para in enumerate(article.get("paragraphs", [])):
            text = str(para.get("context", ""))
            nid = f"{ai:03d}-{pi:02d}"
            notes.append(Note(id=nid, title=title or nid, sections=(Section((), text),),
                              content_hash=content_hash(f"{title}\n{text}".encode())))
    return notes, []


def read_beir(path: str | Path) -> tuple[list[Note], list[Skipped]]:
    """A BEIR corpus as a vault: one note per passage, id = _id, one untitled section."""
    p = Path(path)
    corpus = p / "corpus.jsonl" if p.is_dir() else p
    notes, skipped, seen = [], [], set()
    with corpus.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                _id = str(row["_id"])
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                skipped.append(Skipped(f"{corpus}:{lineno}", f"not a BEIR corpus row ({e})"))
                continue
            if _id in seen:
                skipped.append(Skipped(f"{corpus}:{lineno}", f"duplicate _id {_id!r}"))
                continue
            seen.add(_id)
            text = str(row.get("text") or "")
            title = str(row.get("title") or "")
            notes.append(Note(id=_id, title=title or _id, sections=(Section((), text),),
                              content_hash=content_hash(f"{title}\n{text}".encode())))
    return notes, skipped
