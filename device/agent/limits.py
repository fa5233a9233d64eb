"""The agent tools' bounds that the command line checks too, in a module that
imports nothing, so a command's flags do not load the tools."""

MAX_DAYS_BACK = 36_500  # check_notebook's days_back and the like: a century

__all__ = ["MAX_DAYS_BACK"]
