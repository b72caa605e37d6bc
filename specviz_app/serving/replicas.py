"""Several app replicas behind nginx, sharing one trace store: `python -m specviz_app.serving.replicas`.

One command starts N copies of the app (`streamlit run app.py`, each its own process, models and
port on 127.0.0.1) and Debian's nginx in front of them on one port. Streamlit keeps a session in
the memory of the process that serves its websocket, so the proxy must keep a browser on one
replica ("sticky sessions"): nginx gives each browser a cookie on its first request and picks the
replica by a consistent hash of it (`hash ... consistent`, open-source nginx has no `sticky`).
When a replica stops, nginx sends its browsers to another one; Streamlit's page reconnects by
itself and starts a new session there from the page's URL. Every finished run is written to the
shared trace store (specviz.traces.trace_store, SPECVIZ_TRACE_STORE) and its id put into the URL
(`?trace=<id>`), so the new session opens the very same trace: nothing finished is lost.

    python -m specviz_app.serving.replicas                    # 2 replicas on http://127.0.0.1:8500
    python -m specviz_app.serving.replicas --replicas 3 --host 0.0.0.0 --port 80 --store /srv/specviz

`Deployment` is the same thing as a Python object (tests/test_replicas.py drives it). No streamlit
import here: this module only writes a config and starts processes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from specviz.traces import trace_store
from specviz_app.serving import launch

ROOT = Path(__file__).resolve().parents[2]  # where the replicas run (a checkout's root)
COOKIE = "specviz_replica"
START_TIMEOUT_S = 120.0  # a replica answers /_stcore/health within this (imports on a busy CPU)

NGINX_CONF = """\
# Written by specviz_app/serving/replicas.py: {replicas} app replicas behind one port.
{user}worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log {work}/nginx-access.log;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    client_max_body_size 51m;  # the app takes uploads of 50 MB (specviz_app/serving/launch.py)

    map $http_upgrade $connection_upgrade {{ default upgrade; "" close; }}
    # Sticky sessions: a browser without the cookie gets a fresh random key, kept in the cookie.
    map $cookie_{cookie} $sticky {{ "" $request_id; default $cookie_{cookie}; }}

    upstream specviz {{
        hash $sticky consistent;
{servers}
    }}
    server {{
        listen {host}:{port};
        location / {{
            proxy_pass http://specviz;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;  # Streamlit's websocket
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_read_timeout 1h;  # a session's websocket stays open for the whole lesson
            proxy_send_timeout 1h;
            proxy_buffering off;
            # A stopped replica: try the next one (its sessions start again there).
            proxy_next_upstream error timeout http_502 http_503;
            add_header Set-Cookie "{cookie}=$sticky; Path=/; SameSite=Lax" always;
            add_header X-Specviz-Replica $upstream_addr always;  # which replica answered (tests read it)
        }}
    }}
}}
"""


def nginx_binary() -> str | None:
    """Debian's nginx (`apt-get install nginx`), or None when it is not installed."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).is_file()), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.status == 200 and r.read().strip() == b"ok"
    except OSError:
        return False


def start_one_app(log: Path, timeout_s: float = 120) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on a free loopback port, offline, as the browser tests start it; returns
    the process and its URL once it answers its health check (the load tests: scripts/ws_load.py,
    scripts/soak.py)."""
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    cmd += ["--server.address", "127.0.0.1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while not healthy(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"the app did not start; see {log}")
        time.sleep(0.3)
    return proc, url


class Deployment:
    """N replicas and nginx. start() returns once the proxy and every replica answer."""

    def __init__(
        self,
        replicas: int = 2,
        port: int = 8500,
        host: str = "127.0.0.1",
        store: str | os.PathLike | None = None,
        work: str | os.PathLike | None = None,
        replica_ports: list[int] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        if replicas < 1:
            raise ValueError(f"run at least one replica; got {replicas!r}")
        self.nginx = nginx_binary()
        if self.nginx is None:
            raise RuntimeError("nginx is not installed: `apt-get install nginx` (Debian's package) and run again.")
        self.work = Path(work or tempfile.mkdtemp(prefix="specviz-replicas-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.store = Path(store or self.work / "traces")
        self.host, self.port = host, port
        self.replica_ports = replica_ports or [free_port() for _ in range(replicas)]
        self.env = env or {}
        self.url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"
        self.apps: list[subprocess.Popen | None] = []
        self.proxy: subprocess.Popen | None = None
        self._logs: list = []

    def replica_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.replica_ports[i]}"

    def write_config(self) -> Path:
        servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=10s;" for p in self.replica_ports)
        user = "user root;\n" if os.geteuid() == 0 else ""  # root's workers may write the work folder
        conf = NGINX_CONF.format(
            replicas=len(self.replica_ports),
            user=user,
            work=self.work,
            cookie=COOKIE,
            servers=servers,
            host=self.host,
            port=self.port,
        )
        path = self.work / "nginx.conf"
        path.write_text(conf, encoding="utf-8")
        return path

    def start(self) -> Deployment:
        trace_store.TraceStore(self.store)  # create it before any replica writes
        for i in range(len(self.replica_ports)):
            self.apps.append(self._start_app(i))
        conf = self.write_config()
        test = [self.nginx, "-t", "-c", str(conf), "-p", str(self.work)]
        check = subprocess.run(test, capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"nginx refused the generated config {conf}:\n{check.stderr}")
        log = (self.work / "nginx.out").open("w")
        self._logs.append(log)
        self.proxy = subprocess.Popen(
            [self.nginx, "-c", str(conf), "-p", str(self.work), "-g", "daemon off;"], stdout=log, stderr=log
        )
        for i in range(len(self.replica_ports)):
            self._wait_healthy(self.replica_url(i), self.apps[i], f"replica {i + 1}")
        self._wait_healthy(self.url, self.proxy, "nginx")
        return self

    def _start_app(self, i: int) -> subprocess.Popen:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
        env.update(self.env)
        env[trace_store.ENV] = str(self.store)
        log = (self.work / f"replica-{i + 1}.log").open("w")
        self._logs.append(log)
        # What `specviz app` runs (its server settings included), on a loopback port of its own.
        cmd = launch.app_command(["--server.port", str(self.replica_ports[i]), "--server.address", "127.0.0.1"])
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def _wait_healthy(self, url: str, proc: subprocess.Popen, name: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not healthy(url):
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with code {proc.returncode}; see the logs in {self.work}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer {url}/_stcore/health in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.2)

    def stop_replica(self, i: int, crash: bool = False) -> None:
        """Stop one replica, as a machine leaving mid-class would (its sessions reconnect elsewhere);
        crash=True kills it at once, as a power cut would (the store's writes are atomic)."""
        proc = self.apps[i]
        if proc is not None:
            if crash:
                proc.kill()
                proc.wait(10)
            else:
                stop_process(proc)
            self.apps[i] = None

    def stop(self) -> None:
        if self.proxy is not None:
            stop_process(self.proxy, signal.SIGQUIT)  # nginx's graceful stop
            self.proxy = None
        for i in range(len(self.apps)):
            self.stop_replica(i)
        for log in self._logs:
            log.close()
        self._logs.clear()

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace_s: float = 30) -> None:
    """Ask a server process to stop (`sig`), and kill it if it has not within `grace_s` seconds."""
    proc.send_signal(sig)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specviz_app.serving.replicas", description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=2, help="app processes (default 2)")
    ap.add_argument("--port", type=int, default=8500, help="the port nginx listens on (default 8500)")
    ap.add_argument("--host", default="127.0.0.1", help="the address nginx listens on (0.0.0.0: the whole network)")
    ap.add_argument("--store", help="the shared trace store's folder (default: traces/ in the work folder)")
    ap.add_argument("--work", help="where nginx.conf and the logs go (default: a new temporary folder)")
    args = ap.parse_args(argv)
    try:
        deployment = Deployment(args.replicas, args.port, args.host, args.store, args.work)
        deployment.start()
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"specviz: {args.replicas} replicas behind nginx on {deployment.url}")
    print(f"logs and nginx.conf: {deployment.work}")
    urls = ", ".join(f"{deployment.replica_url(i)}/metrics" for i in range(args.replicas))
    print(f"each replica's own metrics (docs/reliability.md, Metrics): {urls}")
    print(f"trace store: {deployment.store}; Ctrl-C stops everything")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    try:
        while not stopping:
            for i, proc in enumerate(deployment.apps):
                if proc is not None and proc.poll() is not None:
                    print(f"replica {i + 1} exited (code {proc.returncode}); the others go on", file=sys.stderr)
                    deployment.apps[i] = None
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        deployment.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
