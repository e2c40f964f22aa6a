#!/usr/bin/env python3
"""CTest container_references: the image recipe and the manifests refer only to what exists.

No container runtime builds the image here, so this checks what a build and a deployment
would trip over:

* every source of a COPY/ADD in packaging/container/Containerfile is a file of the repository
  or the .deb the package build makes (build/package/packages/dockhand_VERSION-1_ARCH.deb);
* every file of the image the Containerfile (ENTRYPOINT, CMD) and the manifests name (commands,
  args, the preStop hook, env values, discovery scripts in the ConfigMaps) is one the dockhand
  package installs (the build tree's install rules, component dockhand, installed into a
  temporary DESTDIR; or, with --deb FILE, `dpkg-deb -c` of a built .deb), or comes from a
  Debian package the Containerfile installs (tini);
* every path under a volume mount is there: a key of the ConfigMap the volume names (defined in
  the manifests), the key of the Secret that docs/operations.md tells to create, or an
  emptyDir;
* the image name and tag agree: the Containerfile's build command, every manifest, and
  docs/operations.md all say dockhand:VERSION, the project's version.

Usage: container_refs_test.py --source-dir SRC --build-dir BUILD --version X.Y.Z --cmake CMAKE
                              [--deb dockhand_X.Y.Z-1_ARCH.deb]
"""
import argparse
import fnmatch
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # Debian: python3-yaml (scripts/setup installs it)
    print("SKIP container_references: no python3-yaml")
    sys.exit(77)

# Files of the image that come from Debian packages, and the package that must be installed.
DEBIAN_FILES = {"/usr/bin/tini": "tini"}

problems = []


def problem(text):
    problems.append(text)
    print(f"PROBLEM: {text}")


def containerfile_instructions(path):
    """(instruction, arguments) per instruction, continuation lines joined, comments dropped."""
    out, current = [], ""
    with open(path) as f:
        for line in f:
            stripped = line.strip()
            if not current and (not stripped or stripped.startswith("#")):
                continue
            if stripped.startswith("#"):
                continue
            if stripped.endswith("\\"):
                current += stripped[:-1] + " "
                continue
            current += stripped
            word, _, rest = current.partition(" ")
            out.append((word.upper(), rest.strip()))
            current = ""
    return out


def exec_form(arguments):
    return json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)


def installed_files(args, tmp):
    """The /usr, /etc, /var paths the dockhand package installs, as on the target system."""
    if args.deb:
        listing = subprocess.run(["dpkg-deb", "-c", args.deb], capture_output=True, text=True,
                                 check=True).stdout
        files = {line.split()[-1].lstrip(".").rstrip("/") for line in listing.splitlines()}
        print(f"install list: dpkg-deb -c {args.deb} ({len(files)} entries)")
        return files
    prefix = "/usr/local"
    with open(os.path.join(args.build_dir, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("CMAKE_INSTALL_PREFIX:"):
                prefix = line.split("=", 1)[1].strip()
    dest = os.path.join(tmp, "install")
    subprocess.run([args.cmake, "--install", args.build_dir, "--component", "dockhand"],
                   env=dict(os.environ, DESTDIR=dest), check=True, stdout=subprocess.DEVNULL)
    files = set()
    for root, dirs, names in os.walk(dest):
        for name in dirs + names:
            path = "/" + os.path.relpath(os.path.join(root, name), dest)
            # As the package has it: the build tree's prefix is /usr there.
            if path.startswith(prefix + "/"):
                path = "/usr/" + path[len(prefix) + 1:]
            files.add(path)
    print(f"install list: cmake --install {args.build_dir} --component dockhand, prefix {prefix} "
          f"as /usr ({len(files)} entries)")
    return files


def manifest_documents(source_dir):
    docs = []
    for path in sorted(glob.glob(os.path.join(source_dir, "packaging/kubernetes/*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    docs.append((os.path.relpath(path, source_dir), doc))
    return docs


def strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


def check_image_file(path, where, installed, apt_packages):
    if path in DEBIAN_FILES:
        if DEBIAN_FILES[path] not in apt_packages:
            problem(f"{where}: {path} comes from Debian's {DEBIAN_FILES[path]}, which the "
                    "Containerfile does not install")
    elif path not in installed:
        problem(f"{where}: {path} is not installed by the dockhand package")


def program_path(word):
    return word if word.startswith("/") else f"/usr/bin/{word}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--cmake", default="cmake")
    # A built package to take the install list from, instead of the build tree's install rules
    # (which are always current; a .deb in build/package may be older than the source).
    parser.add_argument("--deb")
    args = parser.parse_args()
    src = args.source_dir
    image = f"dockhand:{args.version}"
    containerfile = os.path.join(src, "packaging/container/Containerfile")

    with tempfile.TemporaryDirectory(prefix="dockhand-container-refs-") as tmp:
        installed = installed_files(args, tmp)

    # ---- the Containerfile ------------------------------------------------------------------
    instructions = containerfile_instructions(containerfile)
    apt_packages = set()
    for word, rest in instructions:
        if word == "RUN" and "apt-get install" in rest:
            for w in shlex.split(rest.split("apt-get install", 1)[1]):
                if w in ("&&", ";", "||"):
                    break
                if not w.startswith("-"):
                    apt_packages.add(w)
        if word in ("COPY", "ADD"):
            parts = [p for p in exec_form(rest) if not p.startswith("--")]
            for source in parts[:-1]:
                if fnmatch.fnmatch(f"build/package/packages/dockhand_{args.version}-1_amd64.deb",
                                   source):
                    print(f"COPY {source}: the .deb the package build makes (packaging/README.md)")
                elif glob.glob(os.path.join(src, source)):
                    print(f"COPY {source}: in the repository")
                else:
                    problem(f"Containerfile {word} {source}: no such file in the repository, and "
                            "not the package build's .deb")
    # .containerignore (the build context is the repository root): every COPY source must be
    # let back in by a "!" line after the "*" that leaves everything else out.
    ignore_file = os.path.join(src, ".containerignore")
    if os.path.exists(ignore_file):
        with open(ignore_file) as f:
            allowed = [line.strip()[1:] for line in f if line.strip().startswith("!")]
        for word, rest in instructions:
            if word in ("COPY", "ADD"):
                for source in [p for p in exec_form(rest) if not p.startswith("--")][:-1]:
                    if source not in allowed:
                        problem(f".containerignore leaves the COPY source {source} out of the "
                                "build context")
    else:
        problem("no .containerignore: the build context would be the whole tree, build dirs too")
    for word, rest in instructions:
        if word in ("ENTRYPOINT", "CMD"):
            words = exec_form(rest)
            for w in words:
                if w.startswith("/usr/"):
                    check_image_file(w, f"Containerfile {word}", installed, apt_packages)
            if word == "CMD":
                check_image_file(program_path(words[0]), "Containerfile CMD", installed,
                                 apt_packages)
    with open(containerfile) as f:
        tags = set(re.findall(r"-t (\S+)", f.read()))
    if tags != {image}:
        problem(f"Containerfile: the build command tags {sorted(tags)}, expected {image}")

    # ---- the manifests ------------------------------------------------------------------------
    docs = manifest_documents(src)
    configmap_keys = {}
    for path, doc in docs:
        if doc.get("kind") == "ConfigMap":
            configmap_keys[doc["metadata"]["name"]] = set(doc.get("data", {}))
            for key, text in doc.get("data", {}).items():
                if key.endswith(".json"):
                    for s in strings_in(json.loads(text)):
                        if s.startswith("/usr/"):
                            check_image_file(s, f"{path}: ConfigMap {key}", installed,
                                             apt_packages)
    with open(os.path.join(src, "docs/operations.md")) as f:
        operations = f.read()
    secret_keys = {}
    for m in re.finditer(r"kubectl (?:-n \S+ )?create secret generic (\S+)(.*)", operations):
        secret_keys[m.group(1)] = set(re.findall(r"--from-file=([\w.-]+)=", m.group(2)))

    containers = 0
    for path, doc in docs:
        pod = doc.get("spec", {}).get("template", {}).get("spec")
        if not pod:
            continue
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in pod.get("containers", []):
            containers += 1
            where = f"{path}: {doc['kind']} {doc['metadata']['name']} container {container['name']}"
            if container.get("image") != image:
                problem(f"{where}: image {container.get('image')}, expected {image}")
            mounts = sorted(container.get("volumeMounts", []), key=lambda m: -len(m["mountPath"]))
            words = list(container.get("command", [])) + list(container.get("args", []))
            if words:
                check_image_file(program_path(words[0]), f"{where}: program", installed,
                                 apt_packages)
            words += [e["value"] for e in container.get("env", []) if "value" in e]
            words += list(strings_in(container.get("lifecycle", {})))
            for w in words:
                # /proc and /dev are the kernel's (the hook logs to /proc/1/fd/1).
                if not w.startswith("/") or w.startswith(("/proc/", "/dev/")):
                    continue
                if any(w.rstrip("/") == m["mountPath"].rstrip("/") for m in mounts):
                    continue  # the mount itself (DOCKHAND_RUN_DIR)
                mount = next((m for m in mounts if w.startswith(m["mountPath"].rstrip("/") + "/")),
                             None)
                if mount is None:
                    check_image_file(w, where, installed, apt_packages)
                    continue
                key = w[len(mount["mountPath"].rstrip("/")) + 1:]
                volume = volumes.get(mount["name"])
                if volume is None:
                    problem(f"{where}: mount {mount['name']} names no volume")
                elif "configMap" in volume:
                    name = volume["configMap"]["name"]
                    if key not in configmap_keys.get(name, set()):
                        problem(f"{where}: {w}: ConfigMap {name} (in the manifests) has no key {key}")
                elif "secret" in volume:
                    name = volume["secret"]["secretName"]
                    if key not in secret_keys.get(name, set()):
                        problem(f"{where}: {w}: docs/operations.md does not create Secret {name} "
                                f"with key {key}")
                elif "emptyDir" not in volume:
                    problem(f"{where}: {w}: on volume {mount['name']} of an unchecked kind")
    if containers == 0:
        problem("no container found in packaging/kubernetes/*.yaml")
    if image not in operations:
        problem(f"docs/operations.md does not name the image {image}")

    if problems:
        print(f"{len(problems)} problem(s)")
        sys.exit(1)
    print(f"OK: Containerfile and {len(docs)} manifest document(s), {containers} container(s), "
          f"image {image}")


if __name__ == "__main__":
    main()
