"""Package list lives here because setup.cfg cannot add the twistd plugin to `find:`.

The plugin module goes to `twisted/plugins/` inside site-packages, where `twistd` looks for it;
an editable install would not put it there (see DESIGN.md, known pitfalls).
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "twisted.plugins"])
