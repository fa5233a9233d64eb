"""Tools for tests and demos: the sample-life generator and the convergence simulator."""
