"""Overload protection in the handler chain: API Priority and Fairness
(:mod:`apiserver.flowcontrol.apf`, on by default) or, with it off, the max-in-flight limit
(:mod:`apiserver.flowcontrol.maxinflight`). Both fill the chain's ``flow_control`` slot
(``WithPriorityAndFairness`` / ``WithMaxInFlightLimit`` in k8s.io/apiserver/pkg/server/config.go).
"""
