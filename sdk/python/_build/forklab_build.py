"""A PEP 517 build backend for forklab_agent on the standard library only,
so that `pip install ./sdk/python` needs no download (pip's build isolation
would otherwise fetch setuptools). It builds a pure-Python wheel of the
forklab_agent package (its .py files and bundled schemas), an sdist, and an
editable wheel (PEP 660) that points at this directory."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "forklab_agent"
DIST = "forklab_agent"  # the distribution's name, normalized for file names (PEP 427)


def _project():
    """The [project] table's string keys (name, description,
    requires-python), read with tomllib where Python has it (3.11+) and
    line by line otherwise."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f).get("project", {})
    except ImportError:
        out, inside = {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("["):
                    inside = line == "[project]"
                elif inside:
                    m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"([^"]*)"', line)
                    if m:
                        out[m.group(1)] = m.group(2)
        return out


def _version():
    with open(os.path.join(ROOT, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p.get("name", "forklab-agent"), "Version: %s" % _version()]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    lines.append("License: MIT")
    text = "\n".join(lines) + "\n"
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        with open(readme, encoding="utf-8") as f:
            text += "Description-Content-Type: text/markdown\n\n" + f.read()
    return text


def _files():
    """The package's files, relative to ROOT, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".json")):
                out.append(os.path.relpath(os.path.join(dirpath, name), ROOT))
    return out


def _wheel(wheel_directory, contents):
    """Writes a wheel holding contents ((archive name, bytes) pairs) and
    its dist-info; returns its file name."""
    info = "%s-%s.dist-info" % (DIST, _version())
    contents = list(contents) + [
        (info + "/METADATA", _metadata().encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: forklab_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (info + "/top_level.txt", (PACKAGE + "\n").encode()),
    ]
    record = []
    for name, data in contents:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "/RECORD,,")
    contents.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    filename = "%s-%s-py3-none-any.whl" % (DIST, _version())
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in contents:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data)
    return filename


def _read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [(rel.replace(os.sep, "/"), _read(rel)) for rel in _files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file puts this directory on sys.path: edits are seen at once.
    return _wheel(wheel_directory, [("__editable__.%s.pth" % DIST, (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (DIST, _version())
    filename = base + ".tar.gz"
    names = ["pyproject.toml", "README.md", os.path.join("_build", "forklab_build.py")] + _files()
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in names:
            if os.path.exists(os.path.join(ROOT, rel)):
                data = _read(rel)
                ti = tarfile.TarInfo(base + "/" + rel.replace(os.sep, "/"))
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
                t.addfile(ti, io.BytesIO(data))
        pkg = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size, ti.mode, ti.mtime = len(pkg), 0o644, 0
        t.addfile(ti, io.BytesIO(pkg))
    return filename
