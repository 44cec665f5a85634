"""A PEP 517 build backend for fencelock, in the standard library alone.

It lets pip install the package from this folder with nothing else on the
machine: no setuptools, no wheel, no index (``pip install ./clients/python``
works offline, in a fresh venv). It packs src/fencelock into a pure-Python
wheel (py3-none-any), and for ``pip install -e`` an editable one that points
a .pth file at src/.
"""
import base64
import hashlib
import os
import tarfile
import zipfile

NAME = "fencelock"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(HERE, "src")
DIST_INFO = "%s-%s.dist-info" % (NAME, VERSION)


def _metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Fenced distributed locks through fencelockd, and fenced writes to storage-guard\n"
            "License: MIT\nRequires-Python: >=3.9\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, readme))


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: fencelock_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _files():
    """The package's files: (path in the wheel, path on disk)."""
    out = []
    for root, dirs, names in os.walk(os.path.join(SRC, NAME)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith((".py", ".typed")):
                full = os.path.join(root, n)
                out.append((os.path.relpath(full, SRC).replace(os.sep, "/"), full))
    return out


def _write_wheel(wheel_directory, entries):
    """entries: (name in the wheel, bytes). Adds the dist-info and RECORD."""
    entries = list(entries) + [(DIST_INFO + "/METADATA", _metadata().encode("utf-8")),
                               (DIST_INFO + "/WHEEL", _wheel_file().encode())]
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        record.append(DIST_INFO + "/RECORD,,")
        z.writestr(DIST_INFO + "/RECORD", "\n".join(record) + "\n")
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_editable = get_requires_for_build_sdist = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(_wheel_file())
    return DIST_INFO


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for arc, full in _files():
        with open(full, "rb") as f:
            entries.append((arc, f.read()))
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("_fencelock_editable.pth", (SRC + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "_build/fencelock_build.py"):
            t.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        for arc, full in _files():
            t.add(full, arcname=base + "/src/" + arc)
        pkg_info = os.path.join(sdist_directory, "PKG-INFO")
        with open(pkg_info, "w", encoding="utf-8") as f:
            f.write(_metadata())
        t.add(pkg_info, arcname=base + "/PKG-INFO")
        os.unlink(pkg_info)
    return name
