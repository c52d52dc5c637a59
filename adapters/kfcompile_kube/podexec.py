"""The port's ``exec``: a command run in a container through the exec websocket (``execstream``:
opened, read frame by frame; with websocket-client, imported at the first exec)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from attrs import evolve

from kfcompile.lifecycle.ports import ExecOutput, ExecResult
from kfcompile_kube import compat
from kfcompile_kube.errors import answer_error, handshake_error
from kfcompile_kube.paths import pod_path
from kfcompile_kube.transport import Transport, redacting


class PodExec:
    """``exec`` of ``ports.Cluster`` (a part of ``KubeCluster``): the command runs for the
    transport's ``exec_timeout`` in all."""

    _transport: Transport

    @redacting
    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: Sequence[str],
        stdin: bytes | Iterable[bytes] = b"",
        *,
        stdout: Callable[[ExecOutput], object] | None = None,
    ) -> ExecResult:
        from kfcompile_kube.execstream import HANDSHAKE_ERRORS, Channels, open_exec

        feed = ([stdin] if stdin else []) if isinstance(stdin, bytes) else stdin
        has_stdin = not isinstance(stdin, bytes) or bool(stdin)
        query = [
            *(("command", arg) for arg in command),
            ("container", container),
            ("stdin", "true" if has_stdin else "false"),
            ("stdout", "true"),
            ("stderr", "true"),
            ("tty", "false"),
        ]
        transport = self._transport
        url, headers = transport.prepare(pod_path(namespace, pod, "exec"), query, {})
        try:
            ws = open_exec(transport.client.configuration, url, headers)
        except compat.Refused as e:
            raise answer_error(e.status, e.body, e.headers, url) from None
        except HANDSHAKE_ERRORS as e:
            timeouts = (transport.connect_timeout, transport.exec_timeout)
            raise handshake_error(e, url, timeouts) from e
        channels = Channels(ws, pod, transport.exec_timeout)
        output = channels.run(iter(feed), has_stdin)
        collected = bytearray()
        try:
            if stdout is None:
                for chunk in output:
                    collected += chunk
            else:
                stdout(output)
                for _ in output:
                    pass  # what the consumer left unread
        except BaseException:
            output.close()
            # No goodbye: the server may still be sending.
            ws.shutdown()  # type: ignore[no-untyped-call]
            raise
        ws.close()
        # close() skips the socket once the server has said goodbye.
        ws.shutdown()  # type: ignore[no-untyped-call]
        assert channels.result is not None, "the stdout consumer closed the output"
        return evolve(channels.result, stdout=bytes(collected))
