"""The wheel carries libcuvil, the tools and the runtime it compiles models against (make
install's tree, in cuvil/_native). `make wheel` puts them there from an existing build; a plain
`pip install ./python` from a checkout builds them here first (CMake, in the checkout's
build-pip/; needs the Debian packages of tools/setup/setup.sh --debs-only). An editable
install (the project venv's) uses the checkout's build/ instead.
The package has no Python extension (it uses ctypes), so the wheel is py3-none-<platform>."""
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:  # older setuptools, with the wheel package
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


class BuildWithNative(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install (tools/setup/setup.sh) uses the checkout's build/
        native = Path(self.build_lib) / "cuvil" / "_native"
        if (native / "lib" / "libcuvil.so").is_file():
            return  # make wheel staged it
        if not (REPO / "CMakeLists.txt").is_file():
            raise SystemExit("cuvil: no cuvil/_native and no Cuvil checkout above python/ to build it from")
        build = REPO / "build-pip"
        for cmd in (["cmake", "-S", str(REPO), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
                    ["cmake", "--build", str(build), "-j"],
                    ["cmake", "--install", str(build), "--prefix", str(native.resolve())]):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(cmdclass={"build_py": BuildWithNative, "bdist_wheel": PlatformWheel})
