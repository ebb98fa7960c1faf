"""deploy/kubernetes, checked without a cluster: yamllint passes, and the parsed manifests hold
what a deployment needs. The socket directory is one volume shared by the daemon and the
training container (the same hostPath in the DaemonSet variant, one emptyDir in the sidecar
variant), the training container gets the injector and the FLOPSCOPE_* environment, every
flopscope container runs one image of this version, non-root, with limits and probes, and the
aggregator has its volume, Service and TLS Secret. What can run here runs: every daemon command
line and probe of the manifests is executed against the build's flopscoped (paths moved into a
temp dir).

This is a mock-free validation of the files, NOT a cluster: nothing here starts a kubelet or
pulls an image. tests/integration/test_pod_namespaces.py runs the pod's shape (daemon and job in
separate namespaces sharing only the socket directory) for real."""

import posixpath
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from harness import BUILD_DIR, client, tool  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
BUNDLE_ROOT = "/opt/flopscope"  # where deploy/kubernetes/Dockerfile unpacks the bundle
IMAGE_REPOSITORY = "registry.example.com/flopscope"
WORKLOADS = ("DaemonSet", "StatefulSet", "Job")


def load_objects():
    objects = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                doc["__file__"] = path.name
                objects.append(doc)
    return objects


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def all_containers(spec):
    return [*spec.get("initContainers", []), *spec["containers"]]


def is_daemon(container):
    return container.get("command", [""])[0].endswith("/flopscoped")


def is_training(container):
    return any(e["name"] == "LD_PRELOAD" for e in container.get("env", []))


def option(argv, flag):
    return argv[argv.index(flag) + 1]


def mount_of(container, path):
    """(volume name, path inside the volume) for `path`, from the deepest mount holding it."""
    best = None
    for mount in container.get("volumeMounts", []):
        root = mount["mountPath"].rstrip("/")
        if path == root or path.startswith(root + "/"):
            if best is None or len(root) > len(best[2]):
                best = (mount["name"], posixpath.relpath(path, root), root)
    return None if best is None else best[:2]


def volume(spec, name):
    return next(v for v in spec.get("volumes", []) if v["name"] == name)


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def help_flags(argv):
    text = subprocess.run([*argv, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def local_binary(path):
    """The build's binary for a path inside the image's bundle."""
    return tool(posixpath.basename(path))


class KubernetesManifestsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.objects = load_objects()
        cls.workloads = [o for o in cls.objects if o["kind"] in WORKLOADS]
        version = subprocess.run([tool("flopscoped"), "--version"], capture_output=True,
                                 text=True, check=True).stdout.split()[-1]
        cls.image = f"{IMAGE_REPOSITORY}:{version}"

    def of_kind(self, kind):
        return [o for o in self.objects if o["kind"] == kind]

    def test_yamllint(self):
        yamllint = shutil.which("yamllint")
        if yamllint is None:
            self.skipTest("yamllint is not installed (scripts/setup_deps.sh test set)")
        result = subprocess.run([yamllint, "--strict", "-c", str(MANIFESTS / ".yamllint"),
                                 str(MANIFESTS)], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_the_expected_objects_exist(self):
        kinds = sorted(o["kind"] for o in self.objects)
        for kind in ("Namespace", "DaemonSet", "StatefulSet", "Service", "Secret"):
            self.assertIn(kind, kinds)
        self.assertEqual(len(self.of_kind("Job")), 2, "a job beside the DaemonSet, a sidecar job")

    def test_flopscope_containers_run_this_versions_image_hardened(self):
        for obj in self.workloads:
            spec = pod_spec(obj)
            for container in all_containers(spec):
                where = f"{obj['__file__']} {obj['metadata']['name']}/{container['name']}"
                image = container["image"]
                if image.startswith(IMAGE_REPOSITORY):
                    self.assertEqual(image, self.image, where)
                resources = container.get("resources", {})
                if not is_training(container):
                    for part in ("requests", "limits"):
                        self.assertLessEqual({"cpu", "memory"}, set(resources.get(part, {})),
                                             f"{where}: resources.{part}")
                security = container.get("securityContext", {})
                self.assertIs(security.get("allowPrivilegeEscalation"), False, where)
                self.assertIn("ALL", security.get("capabilities", {}).get("drop", []), where)
                if image.startswith(IMAGE_REPOSITORY) and security.get("runAsUser") != 0:
                    merged = {**spec.get("securityContext", {}), **security}
                    self.assertIs(merged.get("runAsNonRoot"), True, where)
                    self.assertIs(security.get("readOnlyRootFilesystem"), True, where)
            pod_security = spec.get("securityContext", {})
            self.assertEqual(pod_security.get("seccompProfile", {}).get("type"), "RuntimeDefault",
                             obj["metadata"]["name"])

    def test_daemons_have_probes_and_known_flags(self):
        daemon_flags = help_flags([tool("flopscoped")])
        daemons = 0
        for obj in self.workloads:
            for container in filter(is_daemon, all_containers(pod_spec(obj))):
                daemons += 1
                where = f"{obj['metadata']['name']}/{container['name']}"
                argv = container["command"] + container.get("args", [])
                self.assertEqual(container["command"][0], f"{BUNDLE_ROOT}/bin/flopscoped", where)
                self.assertLessEqual({a for a in argv if a.startswith("--")}, daemon_flags, where)
                for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                    self.assertIn(probe, container, where)
                    command = container[probe]["exec"]["command"]
                    self.assertEqual(command[0], f"{BUNDLE_ROOT}/bin/flopscope", where)
                    self.assertLessEqual(
                        {a for a in command if a.startswith("--")},
                        help_flags([tool("flopscope"), command[1]]), f"{where} {probe}")
                    # The probe asks the daemon of this container, on its socket.
                    self.assertEqual(option(command, "--socket"), option(argv, "--socket"), where)
        self.assertEqual(daemons, 3, "DaemonSet, sidecar, aggregator")

    def test_sidecar_shares_an_empty_dir_socket_with_the_training_container(self):
        job = next(o for o in self.of_kind("Job") if any(
            c.get("restartPolicy") == "Always" for c in pod_spec(o).get("initContainers", [])))
        spec = pod_spec(job)
        sidecar = next(c for c in spec["initContainers"] if is_daemon(c))
        # A native sidecar: an init container that keeps running (Kubernetes >= 1.29).
        self.assertEqual(sidecar["restartPolicy"], "Always")
        train = next(filter(is_training, spec["containers"]))
        socket = option(sidecar["command"], "--socket")
        self.assertEqual(env_of(train)["FLOPSCOPE_SOCKET"]["value"], socket)
        shared = mount_of(sidecar, socket)
        self.assertIsNotNone(shared, "the sidecar's socket is on a volume")
        self.assertEqual(mount_of(train, socket), shared, "same volume, same place in it")
        self.assertIn("emptyDir", volume(spec, shared[0]))
        self.assert_not_in_admin_group(spec, train, sidecar)
        self.assert_training_environment(job, spec, train)

    def test_daemonset_and_its_job_share_the_host_socket_directory(self):
        daemonset = self.of_kind("DaemonSet")[0]
        ds_spec = pod_spec(daemonset)
        daemon = next(filter(is_daemon, ds_spec["containers"]))
        socket = option(daemon["command"], "--socket")
        ds_volume, inside = mount_of(daemon, socket)
        host_socket = posixpath.join(volume(ds_spec, ds_volume)["hostPath"]["path"], inside)
        job = next(o for o in self.of_kind("Job")
                   if not any(is_daemon(c) for c in all_containers(pod_spec(o))))
        spec = pod_spec(job)
        train = next(filter(is_training, spec["containers"]))
        job_socket = env_of(train)["FLOPSCOPE_SOCKET"]["value"]
        job_volume, job_inside = mount_of(train, job_socket)
        self.assertEqual(
            posixpath.join(volume(spec, job_volume)["hostPath"]["path"], job_inside), host_socket)
        self.assertEqual(host_socket, "/run/flopscope/flopscope.sock", "the default socket")
        self.assert_not_in_admin_group(spec, train, daemon)
        self.assert_training_environment(job, spec, train)

    def assert_not_in_admin_group(self, spec, train, daemon):
        """The daemon's group (flopscope in the image) is its default --admin-group, which sees
        every job: the training container must not get it through the pod's fsGroup or
        supplementalGroups, nor run as the daemon's user."""
        group = daemon["securityContext"]["runAsGroup"]
        pod = spec.get("securityContext", {})
        self.assertNotIn(group, [pod.get("fsGroup"), *pod.get("supplementalGroups", [])])
        own = train.get("securityContext", {})
        self.assertNotIn(group, [own.get("runAsGroup")])
        self.assertNotEqual(own.get("runAsUser"), daemon["securityContext"]["runAsUser"])

    def assert_training_environment(self, job, spec, train):
        env = env_of(train)
        preload = env["LD_PRELOAD"]["value"]
        self.assertTrue(preload.startswith(BUNDLE_ROOT + "/"), preload)
        # The injector's place in the bundle is where the build puts it (make dist keeps it).
        self.assertTrue((BUILD_DIR / posixpath.relpath(preload, BUNDLE_ROOT)).exists(), preload)
        dist_volume, _ = mount_of(train, preload)
        copier = next(c for c in spec["initContainers"]
                      if mount_of(c, "/flopscope-dist") and c.get("restartPolicy") != "Always")
        self.assertEqual(mount_of(copier, "/flopscope-dist")[0], dist_volume)
        self.assertIn(f"cp -a {BUNDLE_ROOT}/. /flopscope-dist/", " ".join(copier["command"]))
        self.assertEqual(spec["initContainers"].index(copier), 0, "copied before anything runs")
        self.assertEqual(env["WORLD_SIZE"]["value"], str(job["spec"]["completions"]))
        self.assertEqual(job["spec"]["completionMode"], "Indexed")
        self.assertIn("job-completion-index", env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"])
        self.assertIn("job-name", env["FLOPSCOPE_JOB_ID"]["valueFrom"]["fieldRef"]["fieldPath"])
        readme = (REPO / "README.md").read_text()
        for name in env:
            if name.startswith("FLOPSCOPE_"):
                self.assertIn(f"`{name}`", readme, "documented in README's environment table")

    def test_aggregator_has_volume_service_and_tls_secret(self):
        stateful = self.of_kind("StatefulSet")[0]
        spec = pod_spec(stateful)
        daemon = next(filter(is_daemon, spec["containers"]))
        data = mount_of(daemon, option(daemon["command"], "--data-dir"))
        claims = [c["metadata"]["name"] for c in stateful["spec"]["volumeClaimTemplates"]]
        self.assertIn(data[0], claims, "the data dir is on the StatefulSet's own volume")
        service = next(s for s in self.of_kind("Service")
                       if s["metadata"]["name"] == stateful["spec"]["serviceName"])
        labels = stateful["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(service["spec"]["selector"].items(), labels.items())
        port_names = {p["name"] for p in daemon["ports"]}
        for port in service["spec"]["ports"]:
            self.assertIn(port["targetPort"], port_names)
        tls = next(v for v in spec["volumes"] if "secret" in v)
        secret = next(s for s in self.of_kind("Secret")
                      if s["metadata"]["name"] == tls["secret"]["secretName"])
        self.assertEqual(set(secret["stringData"]), {"tls.crt", "tls.key", "ca.crt"})
        self.assertTrue(all(v.startswith("REPLACE") for v in secret["stringData"].values()),
                        "placeholders only: never a real key in the repository")
        self.assertTrue(next(m for m in daemon["volumeMounts"]
                             if m["name"] == tls["name"])["readOnly"])

    def test_daemon_commands_and_probes_run_against_the_build(self):
        for obj in self.workloads:
            for container in filter(is_daemon, all_containers(pod_spec(obj))):
                with self.subTest(f"{obj['metadata']['name']}/{container['name']}"):
                    self.run_daemon_and_probes(container)

    def run_daemon_and_probes(self, container):
        with tempfile.TemporaryDirectory(prefix="flopscope-k8s-") as tmp:
            argv = container["command"] + container.get("args", [])
            socket, data = option(argv, "--socket"), option(argv, "--data-dir")
            moved = {socket: f"{tmp}/run/flopscope.sock", data: f"{tmp}/data"}
            Path(tmp, "run").mkdir()
            local = [local_binary(argv[0])] + [moved.get(a, a) for a in argv[1:]]
            with open(f"{tmp}/log", "wb") as log:
                daemon = subprocess.Popen(local, stdout=log, stderr=subprocess.STDOUT)
            try:
                probe = container["startupProbe"]["exec"]["command"]
                local_probe = [local_binary(probe[0])] + [moved.get(a, a) for a in probe[1:]]
                deadline = time.monotonic() + 20
                while subprocess.run(local_probe, capture_output=True).returncode != 0:
                    self.assertIsNone(daemon.poll(), Path(tmp, "log").read_text())
                    self.assertLess(time.monotonic(), deadline, Path(tmp, "log").read_text())
                    time.sleep(0.1)
                for name in ("livenessProbe", "readinessProbe"):
                    command = container[name]["exec"]["command"]
                    result = client([moved.get(a, a) for a in command[1:]])
                    self.assertEqual(result.returncode, 0, result.stderr)
            finally:
                daemon.send_signal(signal.SIGTERM)
                self.assertEqual(daemon.wait(30), 0)
            # With the daemon gone the probe fails, as a liveness probe must.
            self.assertNotEqual(subprocess.run(local_probe, capture_output=True).returncode, 0)


if __name__ == "__main__":
    unittest.main()
