"""Builds and installs the `trainscope` Python package (python/trainscope/).

The extension trainscope._core is built by CMake (python/bindings/). build_ext:
  1. uses an already-built module from $TRAINSCOPE_BUILD_DIR (default ./build), as `./dev`
     does: it builds with CMake first, then runs `pip install --no-build-isolation -e .`;
  2. otherwise configures and builds the `_core` target itself in $TRAINSCOPE_BUILD_DIR
     (default ./build-python): `pip install --no-build-isolation .` works from a clean tree.
Environment: TRAINSCOPE_CMAKE_ARGS (extra CMake arguments), JOBS (parallel build jobs).
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def _find_built(build_dir):
    pattern = os.path.join(build_dir, "python", "bindings", "_core*.so")
    found = sorted(glob.glob(pattern), key=os.path.getmtime, reverse=True)
    return found[0] if found else None


class CMakeBuildExt(build_ext):
    def build_extension(self, ext):
        env_dir = os.environ.get("TRAINSCOPE_BUILD_DIR")
        candidates = [env_dir] if env_dir else [os.path.join(ROOT, "build")]
        built = None
        for d in candidates:
            d = os.path.abspath(d)
            so = _find_built(d)
            if so and os.path.exists(os.path.join(d, "CMakeCache.txt")):
                # Rebuild the target in case sources changed since (cheap when up to date).
                self._cmake_build(d, configure=False, check=False)
                built = _find_built(d)
                break
        if built is None:
            d = os.path.abspath(env_dir or os.path.join(ROOT, "build-python"))
            self._cmake_build(d, configure=True, check=True)
            built = _find_built(d)
            if built is None:
                raise RuntimeError(f"CMake did not produce trainscope._core in {d}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built, dest)
        # Editable installs import from python/trainscope/ directly: keep a copy there too.
        inplace = os.path.join(ROOT, "python", "trainscope", os.path.basename(dest))
        if os.path.abspath(dest) != inplace and (self.inplace or self.editable_mode):
            shutil.copyfile(built, inplace)

    editable_mode = False

    def _cmake_build(self, build_dir, configure, check):
        jobs = os.environ.get("JOBS", str(os.cpu_count() or 2))
        if configure or not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            args = ["cmake", "-S", ROOT, "-B", build_dir, f"-DPython3_EXECUTABLE={sys.executable}",
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DTRAINSCOPE_BUILD_TESTS=OFF",
                    "-DTRAINSCOPE_BUILD_BENCH=OFF", "-DTRAINSCOPE_BUILD_EXAMPLES=OFF",
                    "-DTRAINSCOPE_BUILD_PYTHON=ON"]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            args += shlex.split(os.environ.get("TRAINSCOPE_CMAKE_ARGS", ""))
            subprocess.run(args, check=True)
        r = subprocess.run(["cmake", "--build", build_dir, "--target", "_core", "-j", jobs])
        if check and r.returncode != 0:
            raise RuntimeError("building trainscope._core failed")


setup(
    name="trainscope",
    version="0.1.0",
    description="Self-hosted training debugger: capture tensors from PyTorch training, "
                "evaluate rules live, stop the job, report afterwards",
    python_requires=">=3.9",
    package_dir={"": "python"},
    packages=["trainscope"],
    package_data={"trainscope": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("trainscope._core", sources=[])],
    cmdclass={"build_ext": CMakeBuildExt},
    install_requires=["numpy"],
    extras_require={"torch": ["torch"]},
    zip_safe=False,
)
