"""Go compatibility: the one home of the helpers that make our texts and parsing match Go's.

kube-apiserver's answers, error messages and accepted input come from Go's standard library;
clients and operators compare them byte for byte. Each module reproduces one part:

- :mod:`~apiserver.gocompat.quote`: ``strconv.Quote``, ``encoding/json``'s ``quoteChar`` and the
  time package's ``quote``;
- :mod:`~apiserver.gocompat.boolparse`: ``strconv.ParseBool``;
- :mod:`~apiserver.gocompat.intparse`: ``strconv.ParseInt`` and ``strconv.Atoi``;
- :mod:`~apiserver.gocompat.duration`: ``time.ParseDuration`` and ``time.Duration.String``;
- :mod:`~apiserver.gocompat.jsonscan`: ``encoding/json``'s scanner, the text of every JSON
  syntax error;
- :mod:`~apiserver.gocompat.jsonvalues`: JSON values as Go's decoders keep them and the kind
  words of ``json.UnmarshalTypeError``;
- :mod:`~apiserver.gocompat.marshal`: ``json.Marshal`` and ``json.MarshalIndent`` output (and
  a C-encoder route to the same bytes for float-free documents);
- :mod:`~apiserver.gocompat.timefmt`: ``time.Time.Format`` with RFC 3339 layouts and
  ``time.Time.String``;
- :mod:`~apiserver.gocompat.errors`: the error they raise, whose text is Go's.

Nothing else in ``src/apiserver`` defines these (``tests/unit/test_gocompat_unique.py``).
"""
