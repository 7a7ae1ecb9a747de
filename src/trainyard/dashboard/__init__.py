"""The dashboard: the jobs of every family, live and past, in a browser, served by the plane (or a Deployment)."""
