"""The Event resource: conversion, validation, field selection and table printing.

Served as events.k8s.io/v1 and core v1 over one internal form, as kube-apiserver stores
both views as one object (k8s.io/kubernetes ``pkg/registry/core/event``).
"""
