"""The operator: watches jobs and their children through the Kubernetes API and applies plans."""
