"""Builds the Python package `hb` with CMake for pip install . (pyproject.toml).

The extension hb._capi is not compiled by setuptools: build_ext configures
this source tree with CMake (-DHB_PYTHON_BUNDLE_LIB=ON), builds libhb, the
SWIG module and hbrun, and installs CMake's `python` component into the
package: _capi*.so with RUNPATH $ORIGIN next to libhb.so.0 (and
libhb_cuda.so when built), hbrun, the generated capi.py and _config.py.

Environment: HB_CMAKE_ARGS (extra configure arguments, e.g.
"-DHB_WITH_CUDA=OFF"), HB_PIP_BUILD_DIR (CMake build folder to use and keep;
default: a folder under setuptools' build_temp), CMAKE_BUILD_PARALLEL_LEVEL.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(hb VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(os.environ.get("HB_PIP_BUILD_DIR") or Path(self.build_temp) / "cmake").resolve()
        stage = Path(self.build_temp).resolve() / "stage"
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DHB_BUILD_TESTS=OFF", "-DHB_BUILD_BENCH=OFF",
            "-DHB_BUILD_EXAMPLES=OFF", "-DHB_BUILD_DOCS=OFF",
            "-DHB_PYTHON_BUNDLE_LIB=ON", "-DHB_PYTHON_INSTALL_DIR=site",
        ] + shlex.split(os.environ.get("HB_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        parallel = ["-j", os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))]
        targets = ["hb_python", "hbrun"]
        if (build / "cuda").is_dir():
            targets.append("hb_cuda")
        subprocess.check_call(["cmake", "--build", str(build), *parallel, "--target", *targets])
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", str(build), "--component", "python",
                               "--prefix", str(stage)])

        # Everything the python component installed, the extension under the
        # name setuptools expects (hb/_capi.<EXT_SUFFIX>).
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        for f in (stage / "site" / "hb").iterdir():
            if f.is_dir():  # a subpackage (hb/torch)
                shutil.copytree(f, target.parent / f.name, dirs_exist_ok=True)
                continue
            if f.name.startswith("_capi."):
                dest = target
            else:
                dest = target.parent / f.name
            shutil.copy2(f, dest)


setup(
    version=project_version(),
    packages=["hb", "hb.torch"],
    package_dir={"": "bindings/python"},
    ext_modules=[Extension("hb._capi", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
