"""The Debian package: `cargo deb -p nagare` builds it, `dpkg -i` installs it (the
`nagare` system user, /var/lib/nagare, the conffile, the systemd unit), systemd accepts
the unit, the installed binary serves with the installed config as the `nagare` user
exactly as the unit starts it, and `dpkg -r` / `dpkg --purge` leave the machine clean.

Needs root (dpkg -i) and cargo-deb (tests/clients/ops/setup.sh installs it). The machine
needs no running systemd: `systemd-analyze verify` and `security --offline` read unit
files only.
"""

import os
import pathlib
import pwd
import grp
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest
from confluent_kafka import Producer

ROOT = pathlib.Path(__file__).resolve().parents[3]
RELEASE_BIN = ROOT / "target" / "release" / "nagare"
UNIT_DIRS = [pathlib.Path("/lib/systemd/system"), pathlib.Path("/usr/lib/systemd/system")]
CONFFILE = pathlib.Path("/etc/nagare/nagare.toml")
DATA = pathlib.Path("/var/lib/nagare")


def run(*args, check=True, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{shlex.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def package_state():
    """dpkg's status of nagare ("ii", "rc", ...), or None when dpkg never heard of it."""
    p = run("dpkg-query", "-W", "-f=${db:Status-Abbrev}", "nagare", check=False)
    if p.returncode != 0 or p.stdout.strip() in ("", "un"):
        return None
    return p.stdout.strip()


def user_exists(name="nagare"):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def installed_unit():
    for d in UNIT_DIRS:
        if (d / "nagare.service").exists():
            return d / "nagare.service"
    raise AssertionError(f"nagare.service is in none of {UNIT_DIRS}")


@pytest.fixture(scope="module")
def deb():
    """Builds the .deb (from the release binary when there is one) into a temp dir."""
    if os.geteuid() != 0:
        pytest.fail("test_package.py installs a .deb with dpkg -i: run the suite as root")
    if run("cargo", "deb", "--version", check=False, cwd=ROOT).returncode != 0:
        pytest.fail("cargo-deb is missing: run tests/clients/ops/setup.sh")
    # A package left by an interrupted run is purged; a `nagare` user that no package
    # made is someone else's and is left alone.
    if package_state():
        run("dpkg", "--purge", "nagare")
    if user_exists():
        pytest.fail("a `nagare` user exists without the package; remove it to run this test")
    out = pathlib.Path(tempfile.mkdtemp(prefix="nagare-deb-"))
    # --fast: lighter compression, the package is built only to be installed here.
    args = ["cargo", "deb", "-p", "nagare", "--fast", "--output", str(out)]
    if RELEASE_BIN.exists():
        args.append("--no-build")
    run(*args, cwd=ROOT, timeout=1200)
    debs = list(out.glob("*.deb"))
    assert len(debs) == 1, debs
    yield debs[0]
    if package_state():
        run("dpkg", "--purge", "nagare", check=False)
    shutil.rmtree(out, ignore_errors=True)


def test_package_contents(deb):
    info = run("dpkg-deb", "-I", str(deb)).stdout
    assert "Package: nagare" in info, info
    depends = next(line for line in info.splitlines() if line.strip().startswith("Depends:"))
    assert "adduser" in depends and "libc6" in depends, depends
    for script in ("postinst", "postrm", "prerm"):
        assert script in info, info
    conffiles = run("dpkg-deb", "--info", str(deb), "conffiles").stdout.split()
    assert conffiles == [str(CONFFILE)], conffiles

    listing = run("dpkg-deb", "-c", str(deb)).stdout
    entries = {line.split()[-1].lstrip("."): line.split()[0] for line in listing.splitlines()}
    assert entries.get("/usr/bin/nagare", "").startswith("-rwxr-xr-x"), listing
    assert str(CONFFILE) in entries, listing
    assert any(p.endswith("systemd/system/nagare.service") for p in entries), listing
    size = int(next(line.split()[2] for line in listing.splitlines()
                    if line.split()[-1] == "./usr/bin/nagare"))
    # The shipped binary carries no debug info (the release profile strips it). The
    # operations issue's goal: 15 MB (decimal), librdkafka for cluster mode included
    # (built for size, see .cargo/config.toml).
    assert size <= 15_000_000, f"/usr/bin/nagare is {size} bytes"


def test_install_serve_and_purge(deb, tmp_path):
    # Twice: the second run of postinst finds the user and directories already there.
    for _ in range(2):
        run("dpkg", "-i", str(deb))
    assert package_state() == "ii"
    user = pwd.getpwnam("nagare")
    assert user.pw_uid < 1000, user  # a system user
    assert user.pw_dir == str(DATA), user
    assert user.pw_shell in ("/usr/sbin/nologin", "/bin/false"), user
    assert grp.getgrgid(user.pw_gid).gr_name == "nagare"
    st = DATA.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (user.pw_uid, user.pw_gid, 0o750)
    st = CONFFILE.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, user.pw_gid, 0o640)
    assert os.access("/usr/bin/nagare", os.X_OK)

    unit = installed_unit()
    verify_unit(unit)
    serve_as_the_unit_does(unit, user, tmp_path)

    # Removal keeps the configuration, the user and the data; purge removes them.
    run("dpkg", "-r", "nagare")
    assert package_state() == "rc"
    assert not pathlib.Path("/usr/bin/nagare").exists()
    assert CONFFILE.exists() and DATA.is_dir() and user_exists()
    run("dpkg", "--purge", "nagare")
    assert package_state() is None
    assert not user_exists()
    assert not DATA.exists() and not CONFFILE.parent.exists()
    assert not unit.exists()
    wants = pathlib.Path("/etc/systemd/system/multi-user.target.wants/nagare.service")
    assert not wants.is_symlink(), "the enable symlink survived the purge"


def verify_unit(unit):
    """systemd's own checks, offline: the unit parses, its commands exist and its user is
    known (verify), and its sandbox rates as well protected (security --offline)."""
    text = unit.read_text()
    for line in ("User=nagare", "AmbientCapabilities=CAP_NET_BIND_SERVICE",
                 "CapabilityBoundingSet=CAP_NET_BIND_SERVICE", "StateDirectory=nagare",
                 "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
                 "PrivateTmp=yes"):
        assert line in text.splitlines(), f"{line} missing from {unit}"
    v = run("systemd-analyze", "verify", str(unit), check=False)
    # Without a running systemd, verify still parses the unit and checks its binaries;
    # anything it says about our unit is a defect.
    said = [line for line in (v.stdout + v.stderr).splitlines() if "nagare" in line]
    assert v.returncode == 0 and not said, f"systemd-analyze verify:\n{v.stdout}{v.stderr}"
    s = run("systemd-analyze", "security", "--offline=yes", str(unit), check=False)
    overall = next((line for line in s.stdout.splitlines() if "Overall exposure" in line), "")
    assert overall, f"systemd-analyze security:\n{s.stdout}{s.stderr}"
    exposure = float(overall.split("nagare.service:")[1].split()[0])
    assert exposure <= 2.0, overall  # "OK" is below 3.0; 10 is an unsandboxed root service


def serve_as_the_unit_does(unit, user, tmp_path):
    """Runs the unit's ExecStart as the nagare user, on port 0 (NAGARE_*_LISTEN) so the
    test never clashes with a real broker; the data goes where the installed config says."""
    exec_start = next(line.split("=", 1)[1] for line in unit.read_text().splitlines()
                      if line.startswith("ExecStart="))
    # pytest's tmp_path is root's alone; the ports file goes where nagare may write.
    ports_dir = pathlib.Path(tempfile.mkdtemp(prefix="nagare-ports-"))
    os.chown(ports_dir, user.pw_uid, user.pw_gid)
    ports_file = ports_dir / "ports"
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "NAGARE_KAFKA_LISTEN": "127.0.0.1:0",
        "NAGARE_STOMP_LISTEN": "127.0.0.1:0",
        "NAGARE_FORWARD_LISTEN": "127.0.0.1:0",
        "NAGARE_HTTP_LISTEN": "127.0.0.1:0",
    }
    log = open(tmp_path / "nagare.log", "wb")
    # setpriv execs in place (runuser would stay in between and not pass SIGHUP on), with
    # the user, group and no supplementary groups, as systemd's User=/Group= do.
    proc = subprocess.Popen(
        ["setpriv", "--reuid=nagare", "--regid=nagare", "--clear-groups", "--",
         *shlex.split(exec_start), "--ports-file", str(ports_file)],
        cwd=DATA, env=env, stdout=log, stderr=subprocess.STDOUT)

    def log_text():
        return (tmp_path / "nagare.log").read_text(errors="replace")

    try:
        deadline = time.time() + 20
        while not ports_file.exists():
            assert proc.poll() is None, f"nagare exited {proc.returncode}:\n{log_text()}"
            assert time.time() < deadline, f"nagare did not start:\n{log_text()}"
            time.sleep(0.05)
        ports = dict(line.split("=", 1) for line in ports_file.read_text().split())
        with urllib.request.urlopen(f"http://{ports['http']}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"

        p = Producer({"bootstrap.servers": ports["kafka"], "acks": "all"})
        delivered = []
        p.produce("packaged", b"hello from the .deb",
                  on_delivery=lambda err, msg: delivered.append(err))
        assert p.flush(15) == 0 and delivered == [None], delivered
        # The record lives under the installed config's data_dir, owned by nagare.
        part = DATA / "packaged-0"
        assert part.is_dir(), sorted(os.listdir(DATA))
        assert part.stat().st_uid == user.pw_uid
        assert any(f.suffix == ".log" and f.stat().st_size > 0 for f in part.iterdir())

        # ExecReload sends SIGHUP: the broker logs it and keeps serving.
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        assert proc.poll() is None, f"SIGHUP stopped nagare:\n{log_text()}"
        with urllib.request.urlopen(f"http://{ports['http']}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
        assert "SIGHUP" in log_text()

        # systemctl stop sends SIGTERM: a clean exit well within TimeoutStopSec.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(ports_dir, ignore_errors=True)
