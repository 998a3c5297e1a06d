"""The troff man page ``apiserver(8)``, generated from the flag table.

``python -m apiserver.options.manpage > man/apiserver.8`` regenerates the committed page; a test
fails when the file and the table disagree. The output depends on nothing but the table (no date),
so regenerating an unchanged table gives an identical file.
"""

from __future__ import annotations

import sys

from apiserver.options.flagtypes import is_zero
from apiserver.options.help import DESCRIPTION
from apiserver.options.table import FLAGS, GROUPS, Flag
from apiserver.version import DEFAULT_GIT_VERSION

NOT_IMPLEMENTED = (
    "Accepted and validated; not acted on yet: the server logs at start-up that it has no effect."
)


def escape(text: str) -> str:
    """Text -> troff: backslashes and hyphens escaped, no line starting with a control dot."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def _bold(text: str) -> str:
    return f"\\fB{escape(text)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{escape(text)}\\fR"


_VALUE_WORD = {
    "bool": "true|false",
    "int": "int",
    "level": "level",
    "float": "float",
    "string": "string",
    "ip": "ip",
    "strings": "strings",
    "stringarray": "string",
    "duration": "duration",
    "cidrs": "cidr[,cidr]",
    "portrange": "N1-N2",
    "map": "key=value,...",
    "configmap": "key[=value],...",
    "boolmap": "[component:]Name=true|false,...",
    "metriclabels": "metric,label='value,...'",
    "quantity": "quantity",
    "vmodule": "pattern=N,...",
    "version": "true|raw|vX.Y.Z",
}


def _tag(flag: Flag) -> str:
    name = _bold(f"--{flag.name}")
    if flag.short:
        name = f"{_bold('-' + flag.short)}, {name}"
    word = _italic(_VALUE_WORD[flag.type])
    if flag.flag_type.no_opt_default is not None:
        return f"{name}[={word}]"
    return f"{name} {word}"


def _default(flag: Flag) -> str:
    if not is_zero(flag.type, flag.default):
        return flag.flag_type.format(flag.default)
    if flag.type == "bool":
        return "false"
    if flag.type in ("int", "level", "float", "quantity"):
        return "0"
    if flag.type == "duration":
        return "0s"
    if flag.type == "version":
        return "false"
    return "empty"


def _flag_entry(flag: Flag) -> list[str]:
    lines = [".TP", _tag(flag), escape(flag.help)]
    notes = [f"Default: {escape(_default(flag))}."]
    if flag.flag_type.repeatable:
        notes.append("Repeatable: the values of all occurrences are combined.")
    if flag.aliases:
        names = ", ".join(_bold("--" + alias) for alias in flag.aliases)
        notes.append(f"Also accepted as {names}.")
    if flag.deprecated:
        notes.append(f"Deprecated: {escape(flag.deprecated)}.")
    if not flag.implemented:
        notes.append(escape(NOT_IMPLEMENTED))
    for note in notes:
        lines += [".br", note]
    return lines


#: The AUDIT section's paragraphs (what k8s.io/apiserver pkg/server/options/audit.go wires).
AUDIT_PARAGRAPHS = (
    "Audit keeps a record of who did what and when, as audit.k8s.io/v1 Event objects. "
    "Nothing is audited unless --audit-policy-file names a Policy and at least one backend is "
    "configured. The policy's rules are tried in order and the first one that matches a "
    "request (by user, group, verb, resource, namespace or non-resource URL) sets its level: "
    "None (no record), Metadata (the request's user, verb, object reference, source address "
    "and answer code), Request (also the request body) or RequestResponse (also the "
    "response body). A request that no rule matches is not audited. omitStages leaves out "
    "stages (RequestReceived, ResponseStarted for watches, ResponseComplete, Panic) and "
    "omitManagedFields drops managedFields from the recorded objects.",
    "The log backend (--audit-log-path, - for standard output) writes one line per event, "
    "as JSON or in the legacy text format (--audit-log-format), and rotates the file by size "
    "with --audit-log-maxsize, keeping --audit-log-maxbackup backups for --audit-log-maxage "
    "days, gzip-compressed with --audit-log-compress. The webhook backend "
    "(--audit-webhook-config-file, a kubeconfig) POSTs batches of events as an EventList and "
    "retries a failed batch with an exponential backoff starting at "
    "--audit-webhook-initial-backoff. Both backends can be used at once.",
    "Each backend has a mode (--audit-log-mode, --audit-webhook-mode). blocking (the log's "
    "default) records each event before the request goes on and only counts failures; "
    "blocking-strict fails the request with a 500 when its first record cannot be stored; "
    "batch (the webhook's default) queues events and sends them in batches "
    "(--audit-*-batch-*), dropping events with a logged error when the queue is full. On "
    "SIGTERM every queued event is written or sent before the server exits. With "
    "--audit-*-truncate-enabled an event larger than the limit loses its request and "
    "response objects and is annotated audit.k8s.io/truncated. The counters "
    "apiserver_audit_event_total, apiserver_audit_error_total, apiserver_audit_level_total "
    "and apiserver_audit_requests_rejected_total are served on /metrics.",
    "A policy file that is missing, unreadable or invalid, a webhook kubeconfig that cannot "
    "be loaded, or a log file that cannot be created stops start-up with a message naming "
    "the file and the problem. An example policy, with comments, is etc/audit-policy.yaml in "
    "the source tree.",
)


#: The ENCRYPTION AT REST section (k8s.io/apiserver pkg/server/options/encryptionconfig,
#: kube-apiserver's key rotation procedure); docs/encryption.md has the details.
ENCRYPTION_PARAGRAPHS = (
    "--encryption-provider-config names an EncryptionConfiguration "
    "(apiserver.config.k8s.io/v1, YAML or JSON, decoded strictly) whose rule for events lists "
    "providers: identity, aescbc, aesgcm, secretbox (keys: name and base64 secret) or kms "
    "(apiVersion v2, a plugin on a unix socket). The first provider encrypts what is "
    "written, in kube-apiserver's stored format (k8s:enc:<provider>:v1:<key>: and the same "
    "nonce and IV layout), so either server reads the other's store; every provider is "
    "tried on read. A value no provider can read is an error (500), never an empty object. "
    "A missing or invalid file stops start-up with a message naming it. An example is "
    "etc/encryption-config.yaml in the source tree.",
    "Rotating a key: (1) add the new key second in the provider's keys; (2) restart (or let "
    "the automatic reload pick it up) on every server; (3) move the new key first and "
    "restart or reload again; (4) rewrite every event, for example kubectl get events -A -o "
    "json | kubectl replace -f - (an object read with an old key is rewritten even when "
    "unchanged); (5) remove the old key and restart or reload.",
    "With --encryption-provider-config-automatic-reload the file is checked every minute; a "
    "valid change takes effect without a restart once its KMS plugins are healthy, an "
    "invalid one keeps the old configuration and is logged and counted in "
    "apiserver_encryption_config_controller_automatic_reloads_total. KMS plugins are checked "
    "on /healthz and /readyz (kms-providers, or kms-provider-<i>).",
)


def _encryption_section() -> list[str]:
    lines = [".SH ENCRYPTION AT REST"]
    for index, paragraph in enumerate(ENCRYPTION_PARAGRAPHS):
        if index:
            lines.append(".PP")
        lines.append(escape(paragraph))
    return lines


def _audit_section() -> list[str]:
    lines = [".SH AUDIT"]
    for index, paragraph in enumerate(AUDIT_PARAGRAPHS):
        if index:
            lines.append(".PP")
        lines.append(escape(paragraph))
    return lines


def render_man() -> str:
    """The whole page, section 8."""
    out = [
        '.\\" Generated from src/apiserver/options/table.py by',
        '.\\" "python -m apiserver.options.manpage"; do not edit by hand.',
        f'.TH APISERVER 8 "" "apiserver {DEFAULT_GIT_VERSION}" "System Administration"',
        ".SH NAME",
        "apiserver \\- Kubernetes\\-compatible API server for events and health endpoints",
        ".SH SYNOPSIS",
        ".B twistd",
        ".RI [ twistd\\-options ]",
        ".B apiserver",
        ".RI [ flags ]",
        ".br",
        ".B apiserver",
        ".RI [ flags ]",
        ".SH DESCRIPTION",
        escape(DESCRIPTION),
        ".PP",
        escape(
            "It runs as a twistd plugin or as the apiserver command, which runs the same service. "
            "Objects are kept in an embedded SQLite store in --data-dir, or in etcd when "
            "--store-servers is given. The embedded store's writes are committed by a child "
            "process of each server process (python -m apiserver.storage.sqlite.writer_child), "
            "which ignores SIGINT and SIGTERM, stops when the server stops it and dies with "
            "the server; if it dies, writes fail and /readyz fails until the server is "
            "restarted. HTTPS is served on --bind-address:--secure-port; without "
            "--tls-cert-file and --tls-private-key-file a self-signed certificate is generated "
            "in --cert-dir."
        ),
        ".PP",
        escape(
            "Flags use Go pflag syntax: --flag=value or --flag value; booleans as --flag or "
            "--flag=true|false (also 1, 0, t, f, TRUE, FALSE); -v=3, -v 3 or --v=3. List flags "
            "take comma-separated values. Durations use Go syntax (300ms, 1m0s, 2h45m). The "
            "spellings of kube-apiserver (--etcd-servers, --kubelet-timeout, ...) are accepted "
            "as aliases. Unknown flags and positional arguments are errors. Every invalid value "
            "is reported, one per line, before the server exits."
        ),
        ".SH OPTIONS",
    ]
    for group in GROUPS:
        flags = sorted((f for f in FLAGS if f.group == group), key=lambda f: f.name)
        if not flags:
            continue
        out.append(f'.SS "{group} flags"')
        for flag in flags:
            out += _flag_entry(flag)
    out += _audit_section()
    out += _encryption_section()
    out += [
        ".SH FILES",
        ".TP",
        _bold("/var/lib/apiserver"),
        escape("Default --data-dir: the embedded SQLite store."),
        ".TP",
        _bold("/var/run/kubernetes"),
        escape(
            "Default --cert-dir: apiserver.crt and apiserver.key, the self-signed certificate "
            "and key generated when no serving certificate is given."
        ),
        ".SH SIGNALS",
        ".TP",
        _bold("SIGTERM") + ", " + _bold("SIGINT"),
        escape(
            "Start a graceful shutdown: /readyz fails at once, requests are served normally for "
            "--shutdown-delay-duration, then the server stops taking new requests, lets those in "
            "flight finish (see --shutdown-send-retry-after and "
            "--shutdown-watch-termination-grace-period) and exits. A second SIGTERM or SIGINT "
            "exits at once. With --workers above 1 the signal is passed to every worker, each "
            "runs this sequence, and the supervising process exits once all have stopped; a "
            "second signal kills the workers at once."
        ),
        ".SH WORKERS",
        escape(
            "With --workers=N (N > 1, or auto) the process started by twistd binds nothing "
            "itself: it creates --data-dir and the store's schema, writes the self-signed "
            "certificate if one is needed, then starts N copies of itself, each listening on "
            "--secure-port with SO_REUSEPORT once its storage is ready (its store open and its "
            "watch cache filled, or --storage-initialization-timeout passed), so that the "
            "kernel gives connections only to workers that can serve them, and restarts one "
            "that dies (with a growing "
            "delay when it keeps dying); when a worker dies at start-up five times in a row "
            "before any worker has run ten seconds (the port taken, say), it stops the "
            "others and exits with status 1. Health, metrics and /debug describe the worker that "
            'answers; /metrics carries apiserver_worker_info{worker="i"}. With the embedded '
            "store every worker writes the one SQLite file; worker 0 alone runs the TTL "
            "sweeper and the compactor, and a worker's watch cache follows the writes of the "
            "others in revision order. A worker commits under a lock shared by the workers "
            "and syncs the log to disk after letting go of it, one sync for every commit "
            "made meanwhile; a write is answered, and seen by watches, only once it is on "
            "disk. A read served from the file rather than the cache may see a write during "
            "that sync, before its writer is answered. With --debug-socket-path worker i "
            "listens on that path with .i appended. With --audit-log-path worker i writes its "
            "own file, the path with .worker-i before its extension (audit.log becomes "
            "audit.worker-0.log, audit.worker-1.log, ...), each rotated on its own; with "
            "--audit-log-path=- every "
            "worker writes to the standard output."
        ),
        ".PP",
        escape(
            "How many: a worker serves its requests on one core; with the embedded store its "
            "writes go through a writer process of its own, so one worker under a create load "
            "already uses about one and a half cores, and each worker also reads the commits "
            "of the others. Measured on two cores shared with the load generator, two workers "
            "served 1.3-1.7 times the gets of one worker and 0.9 times its creates. Reads scale "
            "with the cores; creates scale with the workers only where each worker has its "
            "cores, up to the commit rate of the one SQLite file (one writer at a time: about "
            "20,000 small creates a second on a local disk) or, with etcd, of its leader."
        ),
        ".SH EXIT STATUS",
        ".TP",
        _bold("0"),
        escape("Clean shutdown, or --help or --version printed."),
        ".TP",
        _bold("1"),
        escape(
            "Invalid command line (each problem is printed on a line of its own), start-up "
            "failure, or a second termination signal."
        ),
        ".SH SEE ALSO",
        ".BR twistd (1)",
        "",
    ]
    return "\n".join(out)


def main() -> None:
    sys.stdout.write(render_man())


if __name__ == "__main__":
    main()
