"""The relay inside a sandbox with network: TCP on the sandbox's own loopback to the worker's egress proxy.

A sandboxed command has a network namespace of its own, whose only interface is its own
loopback: nothing of the host's network, the host's loopback included, is reachable from it.
Network the session grants comes through one door, the egress proxy the worker runs outside
(``_egress.EgressProxy``) on a Unix socket mounted into the sandbox. Programs speak TCP to a
proxy (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``), so this relay listens on
``127.0.0.1:PORT`` in the sandbox and joins each connection to a new one on that socket.

Run as ``python -I -S -c SOURCE SOCKET PORT COMMAND...`` (this file's text is the source; it
imports only the standard library): it listens, forks, and the parent becomes ``COMMAND``
(``execvp``) while the child relays. The sandbox's PID 1 ends when the command does, and the
kernel then ends the relay with every other process of the sandbox.
"""

import os
import socket
import sys
import threading

__all__ = ["main"]

BUFFER = 65536


def pump(source, sink):
    try:
        while True:
            chunk = source.recv(BUFFER)
            if not chunk:
                break
            sink.sendall(chunk)
    except OSError:
        pass
    for end in (sink, source):
        try:
            end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(listener, path):
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


def main():
    path, port, command = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:
        os.setsid()
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the command's output pipes end with the command, not with the relay
            os.dup2(quiet, fd)
        try:
            serve(listener, path)
        finally:
            os._exit(0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":  # run as `python -c SOURCE`; importing it runs nothing
    main()
