"""thd's PEP 517 build backend: `pip install .` builds the package with the project's
own CMake and packs a wheel, offline, with nothing but the standard library.

    python3 -m venv --system-site-packages /tmp/v
    /tmp/v/bin/pip install --no-build-isolation --no-index /path/to/thd

The wheel holds the package thd (python/thd and the extension module thd._C), the
libthd_* shared libraries it loads (thd/lib) and the launchers thdrun and thd-worker
(thd/bin, run through the `thdrun` and `thd-worker` commands pip puts on the
environment's PATH). The copies get a RUNPATH relative to themselves ($ORIGIN) and
lose their debug sections; the build tree is left as it is. Everything else the
libraries need (fmt, OpenSSL, BLAS, MPI, UCX, libfabric) comes from the system, so
the wheel is for this machine's Debian and this Python (tag cpXY-cpXY-linux_<arch>).

Where it builds (the first that applies):
  - config setting `build-dir` (pip --config-settings build-dir=DIR) or the
    environment variable THD_PIP_BUILD_DIR: an existing build tree is reused as it
    is configured (only thd_python, thdrun and thd_worker are built), a new one is
    configured as below;
  - else build-pip/ in the source tree: configured once (the default build type,
    RelWithDebInfo, whose compiler cache entries a development build shares) without
    tests, examples and benchmarks, and reused by later installs.
Config setting `cmake-args` (or THD_PIP_CMAKE_ARGS) adds arguments to that first
configure (shell words, e.g. "-DTHD_CUDA_ARCHITECTURES=90 -DTHD_WITH_UCX=OFF");
`jobs` (or THD_PIP_JOBS) sets the build's parallelism (default: the machine's cores).
"""

import base64
import csv
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

NAME = "thd"
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ["thd_python", "thdrun", "thd_worker"]
EXECUTABLES = ["thdrun", "thd-worker"]
# The package's files the build assembles in <build>/python/thd.
PACKAGE_FILE = re.compile(r".+\.(py|pyi|typed)$")


class BuildError(RuntimeError):
    pass


def _log(msg):
    print(f"thd build backend: {msg}", file=sys.stderr, flush=True)


def _version():
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*thd\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise BuildError("no `project(thd VERSION x.y.z ...)` in CMakeLists.txt")
    return m.group(1)


def _setting(config_settings, key, env):
    value = (config_settings or {}).get(key)
    if isinstance(value, list):  # pip passes a repeated setting as a list
        value = value[-1]
    return value or os.environ.get(env) or None


def _run(cmd, what):
    _log(" ".join(cmd))
    try:
        subprocess.run(cmd, check=True, stdout=sys.stderr)
    except FileNotFoundError as e:
        raise BuildError(f"{what}: {e.filename} not found (the build needs cmake; scripts/install-deps)") from e
    except subprocess.CalledProcessError as e:
        raise BuildError(f"{what} failed with status {e.returncode}: {' '.join(cmd)}") from e


def _build(config_settings):
    build = _setting(config_settings, "build-dir", "THD_PIP_BUILD_DIR") or os.path.join(SOURCE, "build-pip")
    build = os.path.abspath(build)
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        cmd = ["cmake", "-S", SOURCE, "-B", build, "-DTHD_BUILD_TESTS=OFF",
               "-DTHD_BUILD_EXAMPLES=OFF", "-DTHD_BUILD_BENCH=OFF", "-DTHD_WITH_PYTHON=ON",
               f"-DPython3_EXECUTABLE={sys.executable}"]
        cmd += shlex.split(_setting(config_settings, "cmake-args", "THD_PIP_CMAKE_ARGS") or "")
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        _run(cmd, "configuring thd")
    jobs = _setting(config_settings, "jobs", "THD_PIP_JOBS") or str(os.cpu_count() or 1)
    _run(["cmake", "--build", build, "--parallel", jobs, "--target", *TARGETS], "building thd")
    return build


def _tags():
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return impl, impl, platform


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: Master-worker distributed tensor runtime (Python package)\n"
            "Requires-Python: >=3.9\nRequires-Dist: numpy\n")


def _dist_info_files():
    impl, abi, platform = _tags()
    wheel = (f"Wheel-Version: 1.0\nGenerator: thd_build {_version()}\nRoot-Is-Purelib: false\n"
             f"Tag: {impl}-{abi}-{platform}\n")
    entry_points = ("[console_scripts]\n"
                    "thdrun = thd._launchers:thdrun\n"
                    "thd-worker = thd._launchers:thd_worker\n")
    return {"METADATA": _metadata(), "WHEEL": wheel, "entry_points.txt": entry_points}


def _dist_info_name():
    return f"{NAME}-{_version()}.dist-info"


def _package_files(build):
    """(path in the wheel, file in the build tree) of the package, libraries and launchers."""
    pkg = os.path.join(build, "python", NAME)
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    module = os.path.join(pkg, "_C" + ext)
    if not os.path.isfile(module):
        raise BuildError(f"{module} is missing: the build tree {build} is not built for this Python ({ext}); "
                         "use another build directory (THD_PIP_BUILD_DIR) or configure it with "
                         f"-DPython3_EXECUTABLE={sys.executable}")
    files = [(f"{NAME}/{f}", os.path.join(pkg, f)) for f in sorted(os.listdir(pkg)) if PACKAGE_FILE.match(f)]
    files.append((f"{NAME}/_C{ext}", module))
    # The libraries by their sonames (the names the loader looks for): the symlinks
    # libthd_x.so.M.m of the build tree.
    libdir = os.path.join(build, "lib")
    for f in sorted(os.listdir(libdir)):
        path = os.path.join(libdir, f)
        if re.fullmatch(r"libthd_\w+\.so\.\d+\.\d+", f) and os.path.islink(path):
            files.append((f"{NAME}/lib/{f}", os.path.realpath(path)))
    # The backends' modules, which the registry finds next to libthd_datachannel.
    for f in sorted(os.listdir(libdir)):
        if re.fullmatch(r"libthd_backend_\w+\.so", f):
            files.append((f"{NAME}/lib/{f}", os.path.realpath(os.path.join(libdir, f))))
    if not any(w.startswith(f"{NAME}/lib/") for w, _ in files):
        raise BuildError(f"no shared libthd_* in {libdir}: the build must use BUILD_SHARED_LIBS=ON")
    for exe in EXECUTABLES:
        files.append((f"{NAME}/bin/{exe}", os.path.join(build, "bin", exe)))
    return files


def _set_runpath(path, runpath):
    """Sets an ELF file's RUNPATH: with patchelf where there is one, else with CMake,
    which can only write into the space of the RUNPATH the build gave it."""
    if shutil.which("patchelf"):
        _run(["patchelf", "--set-rpath", runpath, path], "setting the RUNPATH")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".cmake", delete=False) as script:
        script.write(f'file(RPATH_SET FILE "{path}" NEW_RPATH "{runpath}")\n')
    try:
        p = subprocess.run(["cmake", "-P", script.name], capture_output=True, text=True)
    finally:
        os.unlink(script.name)
    if p.returncode != 0:
        raise BuildError(f"could not set the RUNPATH of {os.path.basename(path)} to {runpath} (install patchelf, "
                         f"or build in a directory with a longer path):\n{p.stderr}")


def _stage(build, staging):
    """Copies the files into `staging`, stripped of debug sections and with their
    RUNPATH made relative; returns the wheel paths, sorted."""
    strip = shutil.which("strip")
    runpaths = {"lib": "$ORIGIN", "bin": "$ORIGIN/../lib"}
    paths = []
    for arcname, src in _package_files(build):
        dest = os.path.join(staging, arcname)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(src, dest)
        os.chmod(dest, os.stat(dest).st_mode | 0o200)
        sub = arcname.split("/")[1]
        elf = sub in runpaths or arcname.endswith(".so")
        if elf:
            if strip:
                _run([strip, "--strip-debug", dest], "stripping debug sections")
            _set_runpath(dest, runpaths.get(sub, "$ORIGIN/lib"))
        paths.append(arcname)
    return sorted(paths)


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _write_wheel(wheel_directory, staging, paths):
    impl, abi, platform = _tags()
    name = f"{NAME}-{_version()}-{impl}-{abi}-{platform}.whl"
    dist_info = _dist_info_name()
    records = []
    out = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        def add(arcname, data, mode=0o644):
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            records.append((arcname, _record_hash(data), str(len(data))))

        for arcname in paths:
            path = os.path.join(staging, arcname)
            with open(path, "rb") as f:
                data = f.read()
            add(arcname, data, 0o755 if os.access(path, os.X_OK) else 0o644)
        for fname, text in _dist_info_files().items():
            add(f"{dist_info}/{fname}", text.encode())
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerows(records)
        writer.writerow((f"{dist_info}/RECORD", "", ""))
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = (0o100644) << 16
        z.writestr(info, buf.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
    return name


# ---- PEP 517 hooks ----------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []  # cmake and the compilers come from the system


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = os.path.join(metadata_directory, _dist_info_name())
    os.makedirs(dist_info, exist_ok=True)
    for fname, text in _dist_info_files().items():
        with open(os.path.join(dist_info, fname), "w", encoding="utf-8") as f:
            f.write(text)
    return _dist_info_name()


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    """The files git tracks (the source tree must be a git checkout), under
    thd-<version>/, with a PKG-INFO."""
    try:
        listed = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z"], check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise BuildError(f"an sdist is made of the files git tracks, and git ls-files failed in {SOURCE}: {e}") from e
    root = f"{NAME}-{_version()}"
    name = f"{root}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(f for f in listed.decode().split("\0") if f):
            path = os.path.join(SOURCE, rel)
            if os.path.isfile(path):  # a deleted but still listed file, or a submodule, is left out
                tar.add(path, arcname=f"{root}/{rel}", recursive=False)
        info = tarfile.TarInfo(f"{root}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    try:
        build = _build(config_settings)
        with tempfile.TemporaryDirectory(prefix="thd-wheel-") as staging:
            paths = _stage(build, staging)
            name = _write_wheel(wheel_directory, staging, paths)
    except BuildError as e:
        _log(str(e))
        raise
    _log(f"built {name}")
    return name
