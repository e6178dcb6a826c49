"""The installed distribution: a wheel holds the sample site, so `laminae demo` runs without a checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from tests.conftest import ROOT

SITE = ROOT / "examples" / "site"


def test_wheel_ships_the_sample_site_and_the_demo_finds_it(tmp_path):
    source = tmp_path / "source"  # a copy: an in-tree build would leave build/ in the repository
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", ".pytest_cache", ".ruff_cache", "bench", "tests"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("laminae-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"laminae/site/{p.relative_to(SITE).as_posix()}" for p in SITE.rglob("*") if p.is_file()}
    assert expected and expected <= names
    assert "laminae/tasks/report/templates/report.html.j2" in names
    assert not any(n.startswith(("tasks/", "flows/", "schemas/", "examples/")) for n in names)

    target = tmp_path / "installed"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    shutil.rmtree(source)  # nothing may be read from a checkout
    probe = ("import laminae.flows.demo as d, sys; "
             "from laminae.flows.demo import SiteServer; "
             "s = SiteServer(); print(d.SITE_DIR); print(len(s.seeds())); s.httpd.server_close()")
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
                         check=True, capture_output=True, text=True).stdout.split()
    assert out[0] == str(target / "laminae" / "site")
    assert int(out[1]) == len([line for line in (SITE / "seeds.txt").read_text().splitlines()
                               if line.strip() and not line.startswith("#")])
