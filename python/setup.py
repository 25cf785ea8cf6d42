"""Only the wheel's tag: the package carries a native library (libcuvil, in cuvil/_native) but
no Python extension, so its wheel is py3-none-<platform>, any CPython 3 on this platform."""
from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(cmdclass={"bdist_wheel": PlatformWheel})
