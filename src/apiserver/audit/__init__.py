"""Audit: the policy, the event of each request, and the log and webhook backends.

See :mod:`apiserver.audit.interface` for the contract between the pieces.
"""
