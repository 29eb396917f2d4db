#!/usr/bin/env python3
"""The Helm commands the chart tests use, through PyPI's helm-python-sdk (Helm v4's own Go SDK in a
wheel; there is no helm binary). scripts/install-helm.sh installs the pinned version below into
~/.cache/nats-operators/helm-python-sdk/<version>, which this shim puts first on sys.path.

usage:
  helm.py version
  helm.py lint CHART [-f VALUES]... [--strict]
  helm.py template CHART [-f VALUES]... [--name NAME] [--namespace NS]
  helm.py install|upgrade CHART NAME --kubeconfig FILE --namespace NS [-f VALUES]...
          [--disable-openapi-validation] [--server-side true|false|auto]
  helm.py uninstall NAME --kubeconfig FILE --namespace NS
  helm.py rollback NAME [--version N] --kubeconfig FILE --namespace NS
  helm.py test NAME --kubeconfig FILE --namespace NS
  helm.py package CHART [-d DIR]      (the chart as CHART's name-version.tgz in DIR; prints its path)

`template` prints what `helm template` prints: each rendered document as `---`, a `# Source:`
line and the document, in template path order. Values files merge left to right (later wins).
Exit status: 0 done; 1 Helm refused (the reason on stderr); 2 usage; 3 the SDK is missing.
"""

import argparse
import json
import os
import sys

# The pinned helm-python-sdk (scripts/install-helm.sh reads it from here).
HELM_PYTHON_SDK_VERSION = "0.2.2"

MISSING = 3


def cache_dir():
    root = os.environ.get("NATS_OPERATORS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "nats-operators",
    )
    return os.path.join(root, "helm-python-sdk", HELM_PYTHON_SDK_VERSION)


def load_sdk():
    """The helm_python module: the cached install first, else one on the path."""
    cached = cache_dir()
    if os.path.isdir(cached):
        sys.path.insert(0, cached)
    try:
        import helm_python  # noqa: PLC0415 (imported late on purpose: the cache goes first)
    except ImportError as e:
        print(
            f"helm.py: helm-python-sdk {HELM_PYTHON_SDK_VERSION} is not installed ({e}); "
            "run scripts/install-helm.sh",
            file=sys.stderr,
        )
        sys.exit(MISSING)
    return helm_python


def read_values(helm, files):
    """Values files merged left to right, as `helm -f a -f b` does (maps deep, others replaced)."""
    merged = {}
    for path in files or []:
        with open(path, encoding="utf-8") as f:
            try:
                doc = helm.values_from_yaml(f.read()) or {}
            except helm.HelmError as e:
                fail(helm, f"{path}: {e}")
        merged = merge(merged, doc)
    return merged


def merge(base, over):
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def split_documents(text):
    """The non-empty YAML documents of one rendered template."""
    docs, current = [], []
    for line in text.splitlines():
        if line.rstrip() == "---":
            docs.append("\n".join(current))
            current = []
        else:
            current.append(line)
    docs.append("\n".join(current))
    out = []
    for d in docs:
        body = [ln for ln in d.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if body:
            out.append(d.strip("\n"))
    return out


def fail(helm, err):
    print(f"helm.py: {type(err).__name__}: {err}", file=sys.stderr)
    sys.exit(1)


def cmd_version(helm, _args):
    print(
        json.dumps(
            {
                "helm_python_sdk": getattr(helm, "__version__", "?"),
                "helm": helm.helm_sdk_version(),
                "pinned": HELM_PYTHON_SDK_VERSION,
            }
        )
    )


def cmd_lint(helm, args):
    report = helm.lint(args.chart, read_values(helm, args.values), strict=args.strict or None)
    worst = 0
    for m in report.get("messages", []):
        worst = max(worst, m.get("severity", 0))
        print(f"[{('UNKNOWN', 'INFO', 'WARNING', 'ERROR')[m.get('severity', 0)]}] {m.get('path')}: {m.get('error')}")
    for e in report.get("errors", []) or []:
        worst = 3
        print(f"[ERROR] {e}")
    print(f"{report.get('total_charts_linted', 0)} chart(s) linted")
    limit = 2 if args.strict else 3
    sys.exit(1 if worst >= limit else 0)


def cmd_template(helm, args):
    try:
        with helm.Chart.load(args.chart) as chart:
            rendered = chart.render(
                read_values(helm, args.values), name=args.name, namespace=args.namespace, is_install=True
            )
    except helm.HelmError as e:
        fail(helm, e)
    out = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        for doc in split_documents(rendered[path]):
            out.append(f"---\n# Source: {path}\n{doc}\n")
    sys.stdout.write("".join(out))


def config(helm, args):
    return helm.Config(kubeconfig_path=args.kubeconfig, namespace=args.namespace)


def summary(release):
    """A release as JSON (what the SDK returns, minus the manifest)."""
    data = release if isinstance(release, dict) else getattr(release, "__dict__", {"release": str(release)})
    data = {k: v for k, v in dict(data).items() if k not in ("manifest", "chart")}
    return json.dumps(data, default=str)


def cmd_install(helm, args):
    """install or upgrade. The SDK's Python methods do not pass Helm's disable_openapi_validation
    nor server_side_apply options, which its native call takes; they are passed here the same way
    the methods pass theirs (one JSON object of options)."""
    opts = {"namespace": args.namespace, "timeout_seconds": args.timeout}
    if args.disable_openapi_validation:
        opts["disable_openapi_validation"] = True
    if args.server_side:
        # install takes a bool, upgrade "true", "false" or "auto".
        opts["server_side_apply"] = (
            args.server_side == "true" if args.command == "install" else args.server_side
        )
    values = read_values(helm, args.values)
    try:
        with config(helm, args) as cfg, helm.Chart.load(args.chart) as chart:
            handle, ref = cfg._chart_args(chart)
            payload = helm._native.call_string(
                "helm_install" if args.command == "install" else "helm_upgrade",
                cfg._raw(),
                cfg._context_arg(None),
                handle,
                ref,
                args.name,
                json.dumps(values),
                json.dumps(opts),
            )
    except helm.HelmError as e:
        fail(helm, e)
    print(summary(json.loads(payload)))


def cmd_uninstall(helm, args):
    try:
        with config(helm, args) as cfg:
            release = cfg.uninstall(args.name, timeout=args.timeout, wait="watcher" if args.wait else None)
    except helm.HelmError as e:
        fail(helm, e)
    print(summary(release))


def cmd_package(helm, args):
    os.makedirs(args.destination, exist_ok=True)
    try:
        path = helm.package(args.chart, destination=args.destination)
    except helm.HelmError as e:
        fail(helm, e)
    print(path)


def cmd_rollback(helm, args):
    """A release back to revision --version (the previous one when 0), e.g. one a refused pre-delete
    hook left `uninstalling`."""
    try:
        with config(helm, args) as cfg:
            release = cfg.rollback(args.name, version=args.version or None, timeout=args.timeout)
    except helm.HelmError as e:
        fail(helm, e)
    print(summary(release))


def cmd_test(helm, args):
    try:
        with config(helm, args) as cfg:
            release = cfg.test(args.name, timeout=args.timeout, logs=True)
    except helm.HelmError as e:
        fail(helm, e)
    print(summary(release))


def main():
    p = argparse.ArgumentParser(prog="helm.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("version")
    lint = sub.add_parser("lint")
    lint.add_argument("chart")
    lint.add_argument("-f", "--values", action="append")
    lint.add_argument("--strict", action="store_true")
    tpl = sub.add_parser("template")
    tpl.add_argument("chart")
    tpl.add_argument("-f", "--values", action="append")
    tpl.add_argument("--name", default="nats-operators")
    tpl.add_argument("--namespace", default="nats-system")
    for name in ("install", "upgrade"):
        c = sub.add_parser(name)
        c.add_argument("chart")
        c.add_argument("name")
        c.add_argument("-f", "--values", action="append")
        c.add_argument("--kubeconfig", required=True)
        c.add_argument("--namespace", required=True)
        c.add_argument("--timeout", type=int, default=120)
        # For an apiserver older than the chart's CRDs (the tests' 1.20): its OpenAPI predates
        # x-kubernetes-validations, which it drops on write.
        c.add_argument("--disable-openapi-validation", action="store_true")
        c.add_argument("--server-side", choices=["true", "false", "auto"])  # install: true/false
    pkg = sub.add_parser("package")
    pkg.add_argument("chart")
    pkg.add_argument("-d", "--destination", default=".")
    for name in ("uninstall", "test", "rollback"):
        c = sub.add_parser(name)
        if name == "rollback":
            c.add_argument("--version", type=int, default=0)
        c.add_argument("name")
        c.add_argument("--kubeconfig", required=True)
        c.add_argument("--namespace", required=True)
        c.add_argument("--timeout", type=int, default=120)
        c.add_argument("--wait", action="store_true")
    args = p.parse_args()
    helm = load_sdk()
    {
        "version": cmd_version,
        "lint": cmd_lint,
        "template": cmd_template,
        "install": cmd_install,
        "upgrade": cmd_install,
        "uninstall": cmd_uninstall,
        "rollback": cmd_rollback,
        "test": cmd_test,
        "package": cmd_package,
    }[args.command](helm, args)


if __name__ == "__main__":
    main()
