"""A fake ``nvidia-cuda-mps-control`` for CPU tests (installed on PATH with a shebang).

Like the real tool: ``-d`` daemonises (double fork), ``-f`` runs in the foreground, and
without flags it is a client that reads commands from stdin and sends them to the daemon
behind ``$CUDA_MPS_PIPE_DIRECTORY/control`` (a real Unix socket). The daemon writes
``nvidia-cuda-mps-control.pid`` in the pipe directory and ``control.log`` in the log
directory, where it also journals every command it receives (``command: <cmd>``).

Fault injection through the daemon's environment: ``FAKE_MPS_NO_SOCKET`` (never create
``control``), ``FAKE_MPS_NOT_READY`` (``get_server_list`` fails), ``FAKE_MPS_NO_PIDFILE``,
``FAKE_MPS_SERVER_LIST`` (PIDs to report, comma separated; default none, as before the first
client). ``FAKE_MPS_REGISTRY`` names a file where each daemon appends its PID so test
teardown can kill every survivor.
"""

import os
import signal
import socket
import sys
import time

PIPE_DIR = os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps"
LOG_DIR = os.environ.get("CUDA_MPS_LOG_DIRECTORY") or "/var/log/nvidia-mps"
CONTROL = os.path.join(PIPE_DIR, "control")
PID_FILE = os.path.join(PIPE_DIR, "nvidia-cuda-mps-control.pid")


def log(line):
    with open(os.path.join(LOG_DIR, "control.log"), "a", encoding="utf-8") as handle:
        handle.write(f"[{time.time():.3f}] {line}\n")


def cleanup():
    for path in (CONTROL, PID_FILE):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def serve():
    registry = os.environ.get("FAKE_MPS_REGISTRY")
    if registry:
        with open(registry, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    signal.signal(signal.SIGTERM, lambda *_: (cleanup(), os._exit(0)))
    log(f"startup pid={os.getpid()} CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}")
    if not os.environ.get("FAKE_MPS_NO_PIDFILE"):
        with open(PID_FILE, "w", encoding="ascii") as handle:
            handle.write(f"{os.getpid()}\n")
    if os.environ.get("FAKE_MPS_NO_SOCKET"):
        while True:
            time.sleep(1)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(CONTROL)
    server.listen(8)
    servers = os.environ.get("FAKE_MPS_SERVER_LIST", "")
    while True:
        conn, _ = server.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            command = data.decode().strip()
            log(f"command: {command}")
            if command == "get_server_list":
                if os.environ.get("FAKE_MPS_NOT_READY"):
                    conn.sendall(b"ERR not ready\n")
                else:
                    conn.sendall(
                        b"OK\n" + "".join(f"{p}\n" for p in servers.split(",") if p).encode()
                    )
            elif command == "quit":
                conn.sendall(b"OK\n")
                conn.close()
                server.close()
                cleanup()
                log("exit")
                os._exit(0)
            else:
                conn.sendall(b"ERR unknown command\n")


def daemonise():
    """Double fork like a real daemon; the caller returns once the middle child is gone."""
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        serve()
    os.waitpid(child, 0)


def client():
    failed = False
    for line in sys.stdin.read().splitlines():
        command = line.strip()
        if not command:
            continue
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(CONTROL)
        except OSError:
            print("Cannot find MPS control daemon process", file=sys.stderr)
            return 1
        with sock:
            sock.sendall((command + "\n").encode())
            reply = b""
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
        status, _, body = reply.decode().partition("\n")
        if status != "OK":
            print(status, file=sys.stderr)
            failed = True
        sys.stdout.write(body)
    return 1 if failed else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["-d"]:
        daemonise()
        sys.exit(0)
    if args == ["-f"]:
        serve()
    sys.exit(client())
