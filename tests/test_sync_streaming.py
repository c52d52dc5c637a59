"""Work-dir sync streams: memory stays flat whatever the size (measured with ``tracemalloc``,
never timed), a broken stream leaves nothing behind and starts over, and the upload reads
from disk as it goes, skipping what is not a file, directory or link."""

from __future__ import annotations

import os
import socket
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import schema_check
from fakekube.cluster import CLAIM, NAMESPACE, LocalCluster

from kfcompile import lifecycle
from kfcompile_kube import TarFiles

MiB = 1 << 20


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(schema_check.require_shared()) as local:
        yield local


@pytest.fixture
def cluster(shared_cluster: LocalCluster) -> LocalCluster:
    shared_cluster.kube.faults.clear()  # none left over from a test that failed early
    return shared_cluster


def _sync(local: LocalCluster, direction: str, where: Path, path: str) -> lifecycle.Synced:
    move = lifecycle.sync_up if direction == "up" else lifecycle.sync_down
    return move(
        local.session(),
        TarFiles(),
        namespace=NAMESPACE,
        pvc=CLAIM,
        path=path,
        local=str(where),
    )


def _peak(run: Callable[[], object]) -> int:
    """Bytes of Python memory at the peak of ``run()``, above what was held before it."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _blob(size: int) -> bytes:
    return bytes(range(251)) * (size // 251) + bytes(size % 251)


def test_sync_down_memory_does_not_grow_with_the_size(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Through the real adapter: the pod's tar goes to disk as it arrives."""
    cluster.store.volume(NAMESPACE, CLAIM)["warm/up"] = b"x"
    _sync(cluster, "down", tmp_path / "warm", "/warm")  # the first exec imports CoreV1Api
    peaks = {}
    for size in (8 * MiB, 64 * MiB):
        blob = _blob(size)
        cluster.store.volume(NAMESPACE, CLAIM)[f"down-{size}/blob.bin"] = blob
        dest = tmp_path / f"dest-{size}"
        peaks[size] = _peak(lambda: _sync(cluster, "down", dest, f"/down-{size}"))  # noqa: B023
        assert (dest / "blob.bin").read_bytes() == blob
        del cluster.store.volume(NAMESPACE, CLAIM)[f"down-{size}/blob.bin"]
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
    cluster.store.volume(NAMESPACE, CLAIM)["cut/blob.bin"] = blob
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
    volume = cluster.store.volume(NAMESPACE, CLAIM)
    assert sorted(k for k in volume if k.startswith("skip/")) == ["skip/train.py"]


def test_sync_up_errors_name_the_local_directory(cluster: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    cluster.store.volume(NAMESPACE, CLAIM)["blocked"] = b"a file where a directory goes"
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
    volume = cluster.store.volume(NAMESPACE, CLAIM)
    assert volume["large/again.bin"] == volume["large/sub/blob.bin"] == blob
