"""The tar that comes back from the sync helper pod is hostile input.

Each attack class is fed to ``TarFiles.unpack`` directly and, as a compromised helper pod would
send it, as the exec output of the fake pod through ``lifecycle.sync_down`` and the real adapter.
Every one must be refused with one line naming the member, leave nothing behind (not even the
destination directory), and touch nothing outside it. Limits stop bombs while streaming.

Both ways stream: memory stays flat whatever the size (measured with ``tracemalloc``, never
timed), a broken stream leaves nothing behind and starts over, and the upload reads from disk
as it goes, skipping what is not a file, directory or link.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import schema_check
from fakekube.cluster import CLAIM, NAMESPACE, LocalCluster, helper_tar, members

from kfcompile import lifecycle
from kfcompile.testing import Exec, ExecAnswer
from kfcompile_local import TarFiles

MiB = 1 << 20

# --- building hostile streams -----------------------------------------------------------------

Member = tuple[tarfile.TarInfo, bytes]


def reg(name: str, data: bytes = b"data") -> Member:
    return tarfile.TarInfo(name), data


def folder(name: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info, b""


def sym(name: str, target: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, b""


def hard(name: str, target: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.LNKTYPE, target
    return info, b""


def special(name: str, kind: bytes) -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = kind, 1, 3
    return info, b""


def tar(*members: Member) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as out:
        for info, data in members:
            info.size = len(data)
            out.addfile(info, io.BytesIO(data) if data else None)
    return buffer.getvalue()


def _chain(steps: str, real_paths: bool) -> list[Member]:
    """Symlinks named ``steps`` each leading into the next 247-character directory, a link at
    the bottom leading back to the top, and ``escape`` one level above where that one leads.
    The bottom link sits at ``a/b/...`` (through the links) or at its real path."""
    comp, path = "d" * 247, ""
    members: list[Member] = []
    for step in steps:
        members += [folder(os.path.join(path, comp)), sym(os.path.join(path, step), comp)]
        path = os.path.join(path, comp)
    deep = os.path.join(*steps, "l" * 254)
    bottom = os.path.join(path, "l" * 254) if real_paths else deep
    return [*members, sym(bottom, "../" * len(steps)), sym("escape", deep + "/..")]


def pathmax_chain() -> list[Member]:
    """CPython gh-135034 / CVE-2025-4517: ``a/b/.../p/lll...`` really is over PATH_MAX long, so
    ``os.path.realpath`` stops resolving there and the ``data`` filter believes ``escape``
    stays inside."""
    return _chain("abcdefghijklmnop", real_paths=False)


def link_chain() -> list[Member]:
    """The same chain, each member at a real path short enough: only resolving the links
    through each other (as the kernel will) shows that ``escape`` leads above the top."""
    return _chain("abcdefghijklmno", real_paths=True)


def negative_size(name: str) -> bytes:
    """A member whose size field is -5 in base-256 (tarfile parses it as is)."""
    block = bytearray(tarfile.TarInfo(name).tobuf(tarfile.GNU_FORMAT))
    block[124:136] = bytes([0xFF] * 11 + [0xFB])
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def gzip_stream(header: bytes, zeros: int, tail: bytes = b"") -> bytes:
    """``header``, ``zeros`` zero bytes and ``tail``, gzipped: a small stream, inflating a lot."""
    packer = zlib.compressobj(9, wbits=31)
    out = [packer.compress(header)]
    block = bytes(MiB)
    for _ in range(zeros // MiB):
        out.append(packer.compress(block))
    out += [packer.compress(bytes(zeros % MiB) + tail), packer.flush()]
    return b"".join(out)


def header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


# Each attack: what the stream holds (given the directory around the destination, to aim at
# it), and the member the refusal must name.
Attack = Callable[[Path], bytes]
ATTACKS: dict[str, tuple[Attack, str]] = {
    "pathmax-symlink-chain": (
        lambda around: tar(reg("first.txt"), *pathmax_chain(), reg("escape/evil", b"pwned")),
        "abcdefghijklmnop"[:1],  # the first path that goes through one of the chain's links
    ),
    "pathmax-hardlink-write-through": (
        lambda around: tar(
            reg("first.txt"), *pathmax_chain(), hard("h", "escape/victim"), reg("h", b"pwned")
        ),
        "a",
    ),
    "symlink-chain-through-links": (
        lambda around: tar(reg("first.txt"), *link_chain(), reg("after.txt")),
        "escape",
    ),
    "dotdot": (lambda around: tar(reg("first.txt"), reg("../evil")), "../evil"),
    "dotdot-inside": (lambda around: tar(reg("first.txt"), reg("ok/../../evil")), "ok/../../evil"),
    "absolute": (
        lambda around: tar(reg("first.txt"), reg(str(around / "evil"))),
        "/",
    ),
    "symlink-absolute": (
        lambda around: tar(reg("first.txt"), sym("link", str(around)), reg("link/evil")),
        "link",
    ),
    "symlink-up": (
        lambda around: tar(reg("first.txt"), sym("link", "../outside")),
        "link",
    ),
    "symlink-through-symlink": (  # each lexically inside; together one level above the top
        lambda around: tar(reg("first.txt"), sym("x", "."), sym("y", "x/..")),
        "y",
    ),
    "write-through-symlink": (
        lambda around: tar(reg("first.txt"), folder("sub"), sym("l", "sub"), reg("l/f")),
        "l/f",
    ),
    "overwrite-a-symlink": (
        lambda around: tar(reg("first.txt"), reg("sub/f"), sym("l", "sub/f"), reg("l", b"new")),
        "l",
    ),
    "hardlink-up": (lambda around: tar(reg("first.txt"), hard("h", "../victim")), "h"),
    "hardlink-absolute": (
        lambda around: tar(reg("first.txt"), hard("h", str(around / "victim"))),
        "h",
    ),
    "hardlink-to-a-symlink": (  # tarfile falls back to copying the link itself: ".." at the top
        lambda around: tar(reg("first.txt"), folder("d"), sym("d/s", ".."), hard("h", "d/s")),
        "h",
    ),
    "character-device": (
        lambda around: tar(reg("first.txt"), special("null", tarfile.CHRTYPE)),
        "null",
    ),
    "block-device": (
        lambda around: tar(reg("first.txt"), special("sda", tarfile.BLKTYPE)),
        "sda",
    ),
    "fifo": (lambda around: tar(reg("first.txt"), special("pipe", tarfile.FIFOTYPE)), "pipe"),
    "negative-size": (
        lambda around: tar(reg("first.txt"))[:1024] + negative_size("neg") + bytes(1024),
        "neg",
    ),
    "name-over-255-bytes": (lambda around: tar(reg("first.txt"), reg("n" * 256)), "nnnn"),
    "path-over-4096-bytes": (
        lambda around: tar(reg("first.txt"), reg("/".join(["d" * 200] * 21))),
        "dddd",
    ),
}


def _around(tmp_path: Path) -> Path:
    """The directory holding the destination, with a file an attack may aim at."""
    around = tmp_path / "around"
    around.mkdir()
    (around / "victim").write_text("untouched\n")
    return around


def _listing(root: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(root).as_posix(): None if p.is_dir() or p.is_symlink() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


def _assert_untouched(around: Path, before: dict[str, bytes | None]) -> None:
    assert _listing(around) == before  # no destination, no staging left, victim unchanged
    assert not (around.parent / "evil").exists() and not (around.parent / "outside").exists()


def _peak(run: Callable[[], object]) -> int:
    """Bytes of Python memory at the peak of ``run()``, above what was held before it."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("attack", ATTACKS)
def test_unpack_refuses_each_attack_and_writes_nothing(tmp_path: Path, attack: str) -> None:
    build, member = ATTACKS[attack]
    around = _around(tmp_path)
    data = build(around)
    before = _listing(around)
    with pytest.raises(ValueError, match=r"^refusing to unpack '") as refused:
        TarFiles().unpack(data, str(around / "dest"))
    assert str(refused.value).startswith(f"refusing to unpack {member!r}"[:-1])
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 300
    _assert_untouched(around, before)


@pytest.mark.parametrize("attack", ["pathmax-symlink-chain", "symlink-up", "dotdot"])
def test_a_refusal_leaves_an_existing_destination_as_it_was(tmp_path: Path, attack: str) -> None:
    around = _around(tmp_path)
    (around / "dest").mkdir()
    (around / "dest" / "first.txt").write_text("mine\n")
    (around / "dest" / "keep").write_text("keep\n")
    before = _listing(around)
    with pytest.raises(ValueError, match="refusing to unpack"):
        TarFiles().unpack(ATTACKS[attack][0](around), str(around / "dest"))
    _assert_untouched(around, before)


def test_names_are_shown_escaped_and_short(tmp_path: Path) -> None:
    name = "\x1b[31mred\x1b[0m/../" + "x" * 5000
    with pytest.raises(ValueError) as refused:
        TarFiles().unpack(tar(reg(name)), str(tmp_path / "dest"))
    message = str(refused.value)
    assert "\x1b" not in message and "\\x1b[31mred" in message and len(message) < 300


# --- limits --------------------------------------------------------------------------------------


def test_a_compression_bomb_stops_at_the_byte_limit(tmp_path: Path) -> None:
    """64 members of 1 MiB of zeros (a 70 KB gzip stream) against an 8 MiB limit."""
    members = [reg(f"zeros-{i:02}", bytes(MiB)) for i in range(64)]
    bomb = zlib.compress(tar(*members), 9, wbits=31)
    assert len(bomb) < 100_000
    with pytest.raises(ValueError, match=r"refusing to unpack 'zeros-08': .*8,388,608 bytes"):
        TarFiles(max_bytes=8 * MiB).unpack(bomb, str(tmp_path / "dest"))
    assert os.listdir(tmp_path) == []


def test_a_member_declaring_more_than_the_limit_is_refused_before_reading_it(
    tmp_path: Path,
) -> None:
    info = tarfile.TarInfo("huge")
    info.size = 2 << 30
    bomb = gzip_stream(header(info), 4 * MiB)  # declares 2 GiB; the stream is cut short
    with pytest.raises(ValueError, match=r"refusing to unpack 'huge': .*limit"):
        TarFiles(max_bytes=1 << 30).unpack(bomb, str(tmp_path / "dest"))
    assert os.listdir(tmp_path) == []


def test_the_number_of_entries_is_limited(tmp_path: Path) -> None:
    members = [reg(f"f{i:03}", b"") for i in range(101)]
    with pytest.raises(ValueError, match=r"refusing to unpack 'f100': more than 100 entries"):
        TarFiles(max_entries=100).unpack(tar(*members), str(tmp_path / "dest"))
    assert os.listdir(tmp_path) == []


def test_a_header_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A pax header declaring 64 MiB: tarfile would read it whole into memory."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, 64 * MiB
    bomb = gzip_stream(header(info), 64 * MiB, tar(reg("after")))

    def refused() -> None:
        with pytest.raises(ValueError, match=r"refusing to unpack .*headers"):
            TarFiles().unpack(bomb, str(tmp_path / "dest"))

    assert _peak(refused) < 16 * MiB
    assert os.listdir(tmp_path) == []


def test_endless_bytes_after_the_end_of_the_archive_are_refused(tmp_path: Path) -> None:
    stream = gzip_stream(tar(reg("a")), 64 * MiB)
    with pytest.raises(ValueError, match="after the end of the archive"):
        TarFiles().unpack(stream, str(tmp_path / "dest"))
    assert os.listdir(tmp_path) == []


# --- what is accepted --------------------------------------------------------------------------


def test_a_good_stream_lands_whole_and_merges_into_an_existing_directory(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    (dest / "sub").mkdir(parents=True)
    (dest / "sub" / "old").write_text("old\n")
    (dest / "replaced").write_text("old\n")
    data = tar(
        folder("."),
        folder("sub"),
        reg("sub/new", b"new\n"),
        reg("replaced", b"new\n"),
        sym("sub/up", "../replaced"),
        hard("sub/again", "sub/new"),
        reg("implicit/dirs/file", b"deep\n"),
    )
    packed = TarFiles().unpack(gzip_stream(data, 0), str(dest))  # gzip is read too
    assert (packed.files, packed.size) == (4, 4 + 4 + 5)
    assert _listing(dest) == {
        "implicit": None,
        "implicit/dirs": None,
        "implicit/dirs/file": b"deep\n",
        "replaced": b"new\n",
        "sub": None,
        "sub/again": b"new\n",
        "sub/new": b"new\n",
        "sub/old": b"old\n",
        "sub/up": None,
    }
    assert os.readlink(dest / "sub" / "up") == "../replaced"
    assert os.stat(dest / "sub" / "again").st_ino == os.stat(dest / "sub" / "new").st_ino
    assert sorted(os.listdir(tmp_path)) == ["dest"]  # no staging directory left


def test_a_directory_where_the_destination_has_a_symlink_is_refused(tmp_path: Path) -> None:
    """Writing into ``dest/data/`` must not follow the user's ``data -> elsewhere`` link."""
    elsewhere, dest = tmp_path / "elsewhere", tmp_path / "dest"
    elsewhere.mkdir()
    dest.mkdir()
    (dest / "data").symlink_to(elsewhere)
    with pytest.raises(ValueError, match=r"refusing to unpack 'data'.*symlink"):
        TarFiles().unpack(tar(reg("first.txt"), reg("data/x")), str(dest))
    assert os.listdir(elsewhere) == [] and sorted(os.listdir(dest)) == ["data"]


def test_garbage_and_an_empty_stream_are_refused(tmp_path: Path) -> None:
    for data in (b"this is not a tar file" * 100, b""):
        with pytest.raises(ValueError, match="not a readable tar stream"):
            TarFiles().unpack(data, str(tmp_path / "dest"))
    assert os.listdir(tmp_path) == []


# --- through the helper pod -------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(schema_check.require_shared()) as local:
        yield local


@pytest.fixture
def cluster(shared_cluster: LocalCluster) -> LocalCluster:
    shared_cluster.kube.faults.clear()  # none left over from a test that failed early
    shared_cluster.sent = helper_tar(shared_cluster.fake)  # nothing sent yet
    shared_cluster.fake.execs.clear()
    return shared_cluster


def sends(cluster: LocalCluster, stdout: bytes | Iterator[bytes]) -> None:
    """The helper pod's ``tar -cf - -C DIR .`` sends ``stdout`` (a compromised pod, say)."""

    def answer(call: Exec) -> ExecAnswer:
        assert call.command[:4] == ("tar", "-cf", "-", "-C"), call.command
        return ExecAnswer(stdout=stdout)

    cluster.fake.on_exec = answer


def archive(name: str, blob: bytes) -> Iterator[bytes]:
    """A tar stream of one file, its bytes sent as views of ``blob`` (no copy of it made)."""
    entry = tarfile.TarInfo(name)
    entry.size = len(blob)
    yield entry.tobuf(tarfile.GNU_FORMAT)
    yield from (memoryview(blob)[i : i + MiB] for i in range(0, len(blob), MiB))  # type: ignore[misc]
    yield bytes(-len(blob) % tarfile.BLOCKSIZE + 2 * tarfile.BLOCKSIZE)


def _sync_pods(local: LocalCluster) -> list[object]:
    local.store.collect()
    return local.store.list("v1", "Pod", NAMESPACE, "kfcompile.dev/role=sync")


def _sync(
    local: LocalCluster,
    direction: str,
    where: Path,
    path: str = "/",
    files: TarFiles | None = None,
) -> lifecycle.Synced:
    move = lifecycle.sync_up if direction == "up" else lifecycle.sync_down
    return move(
        local.session(),
        files or TarFiles(),
        namespace=NAMESPACE,
        pvc=CLAIM,
        path=path,
        local=str(where),
    )


@pytest.mark.parametrize("attack", ATTACKS)
def test_sync_down_refuses_each_attack_from_the_pod(
    cluster: LocalCluster, tmp_path: Path, attack: str
) -> None:
    build, member = ATTACKS[attack]
    around = _around(tmp_path)
    sends(cluster, build(around))
    before = _listing(around)
    with pytest.raises(lifecycle.ClusterError) as refused:
        _sync(cluster, "down", around / "dest")
    assert str(refused.value).startswith(f"cannot unpack into {around / 'dest'}: refusing to")
    assert f"refusing to unpack {member!r}"[:-1] in str(refused.value)
    _assert_untouched(around, before)
    assert len(cluster.fake.execs) == 1 and _sync_pods(cluster) == []


def test_sync_down_stops_a_bomb_from_the_pod(cluster: LocalCluster, tmp_path: Path) -> None:
    chunk = tar(*(reg(f"zeros-{i:02}", bytes(MiB)) for i in range(64)))

    def endless() -> Iterator[bytes]:  # the pod never stops sending
        yield zlib.compress(chunk, 9, wbits=31)
        while True:
            yield bytes(MiB)

    sends(cluster, endless())
    with pytest.raises(lifecycle.ClusterError, match="refusing to unpack 'zeros-08'"):
        _sync(cluster, "down", tmp_path / "dest", files=TarFiles(max_bytes=8 * MiB))
    assert os.listdir(tmp_path) == [] and _sync_pods(cluster) == []


# --- streaming ------------------------------------------------------------------------------


def _blob(size: int) -> bytes:
    return bytes(range(251)) * (size // 251) + bytes(size % 251)


def test_sync_down_memory_does_not_grow_with_the_size(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Through the real adapter: the pod's tar goes to disk as it arrives (what it sends is
    views of one blob, made before the measure)."""
    cluster.sent["/mnt/pvc/warm"] = tar(reg("up", b"x"))
    _sync(cluster, "down", tmp_path / "warm", "/warm")  # the first exec imports CoreV1Api
    peaks = {}
    for size in (8 * MiB, 64 * MiB):
        blob = _blob(size)
        sends(cluster, archive("blob.bin", blob))
        dest = tmp_path / f"dest-{size}"
        peaks[size] = _peak(lambda: _sync(cluster, "down", dest, f"/down-{size}"))  # noqa: B023
        assert (dest / "blob.bin").read_bytes() == blob
    # Before: the whole output in one bytes object (and a second copy), i.e. > 128 MiB.
    assert peaks[64 * MiB] < peaks[8 * MiB] + 4 * MiB, peaks
    assert peaks[64 * MiB] < 16 * MiB, peaks


def test_pack_memory_does_not_grow_with_the_size(tmp_path: Path) -> None:
    """The upload's stream is read from disk as it is drawn (the fake pod keeps what it gets,
    so this is measured at the port)."""
    peaks = {}
    for size in (8 * MiB, 64 * MiB):
        work = tmp_path / f"work-{size}"
        work.mkdir()
        (work / "blob.bin").write_bytes(_blob(size))

        def consume(work: Path = work) -> None:
            for _ in TarFiles().pack(str(work)):
                pass

        peaks[size] = _peak(consume)
    assert peaks[64 * MiB] < peaks[8 * MiB] + 2 * MiB, peaks
    assert peaks[64 * MiB] < 8 * MiB, peaks


def test_a_stream_cut_mid_download_leaves_nothing_and_starts_over(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    blob = _blob(5 * MiB)
    cluster.sent["/mnt/pvc/cut"] = tar(reg("blob.bin", blob))
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "mine").write_text("mine\n")
    seen: list[list[str]] = []

    class Watching(TarFiles):
        """Looks at the destination when the stream breaks: nothing of it is there yet."""

        def unpack(self, chunks: object, directory: str) -> object:
            try:
                return super().unpack(chunks, directory)  # type: ignore[arg-type]
            except BaseException:
                seen.append(sorted(os.listdir(directory)))
                raise

    cluster.kube.faults.add("GET", "/exec", drop_after=2)  # two 1 MiB frames, then gone
    got = lifecycle.sync_down(
        cluster.session(),
        Watching(),
        namespace=NAMESPACE,
        pvc=CLAIM,
        path="/cut",
        local=str(tmp_path / "dest"),
    )
    assert cluster.kube.faults.fired and seen == [["mine"]]
    assert (got.files, got.size) == (1, len(blob))
    assert (tmp_path / "dest" / "blob.bin").read_bytes() == blob
    assert sorted(os.listdir(tmp_path / "dest")) == ["blob.bin", "mine"]


def test_a_failed_tar_in_the_pod_leaves_nothing(cluster: LocalCluster, tmp_path: Path) -> None:
    with pytest.raises(lifecycle.ClusterError, match=r"tar -cf failed .*No such file"):
        _sync(cluster, "down", tmp_path / "dest", "/not-there")
    assert os.listdir(tmp_path) == []


def test_sync_up_skips_sockets_and_fifos(cluster: LocalCluster, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print(1)\n")
    os.mkfifo(work / "fifo")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(work / "agent.sock"))
        sent = _sync(cluster, "up", work, "/skip")
    finally:
        server.close()
    assert (sent.files, sent.size) == (1, 9)
    assert list(members(cluster.sent["/mnt/pvc/skip"])) == ["train.py"]


def test_sync_up_errors_name_the_local_directory(cluster: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    said = b"mkdir: cannot create directory '/mnt/pvc/blocked': File exists\n"  # a file there
    cluster.fake.on_exec = lambda call: ExecAnswer(stderr=said, exit_code=1)
    with pytest.raises(lifecycle.ClusterError) as failed:
        _sync(cluster, "up", tmp_path, "/blocked")
    assert str(failed.value).startswith(f"uploading {tmp_path} to {CLAIM}:/blocked: mkdir")


def test_a_large_upload_streams_through_the_pod(cluster: LocalCluster, tmp_path: Path) -> None:
    """More than one stdin chunk and more than one stream chunk, byte for byte."""
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    blob = _blob(3 * MiB + 7)
    (work / "sub" / "blob.bin").write_bytes(blob)
    os.link(work / "sub" / "blob.bin", work / "again.bin")
    sent = _sync(cluster, "up", work, "/large")
    assert (sent.files, sent.size) == (2, len(blob))  # the hard link is sent as a link
    stream = cluster.sent["/mnt/pvc/large"]
    with tarfile.open(fileobj=io.BytesIO(stream)) as got:
        types = {m.name: m.type for m in got}
    assert types == {"again.bin": tarfile.REGTYPE, "sub": tarfile.DIRTYPE,
                     "sub/blob.bin": tarfile.LNKTYPE}  # fmt: skip
    assert members(stream) == {"again.bin": blob, "sub/blob.bin": blob}
