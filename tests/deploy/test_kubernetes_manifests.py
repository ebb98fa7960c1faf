"""deploy/kubernetes, checked without a cluster: yamllint passes, and the parsed manifests hold
what a deployment needs. The socket directory is one volume shared by the daemon and the
training container (the same hostPath in the DaemonSet variant, one emptyDir in the sidecar
variant), the training container gets the injector and the FLOPSCOPE_* environment, every
flopscope container runs one image of this version, non-root, with limits and probes, and the
aggregator has its volume, Service, TLS Secret and users; the node daemons forward to the
Service's name with a certificate of their own (a node's in the DaemonSet, a person's in the
sidecar, whose Secret lives in the training namespace). What can run here runs: every daemon
command line and probe of the manifests is executed against the build's flopscoped (each volume
a temp dir, each TLS Secret a throw-away CA's certificates, the upstream the aggregator started
from its own manifest), and a job on each node daemon reaches the aggregator.

This is a mock-free validation of the files, NOT a cluster: nothing here starts a kubelet or
pulls an image. tests/integration/test_pod_namespaces.py runs the pod's shape (daemon and job in
separate namespaces sharing only the socket directory) for real."""

import posixpath
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import yaml
from deploy_tls import PERSON, StartedDaemon, forwarded_ranks, make_test_ca, run_tiny_job
from harness import BUILD_DIR, client, tool  # on the path through deploy_tls

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
BUNDLE_ROOT = "/opt/flopscope"  # where deploy/kubernetes/Dockerfile unpacks the bundle
IMAGE_REPOSITORY = "registry.example.com/flopscope"
WORKLOADS = ("DaemonSet", "StatefulSet", "Job")
# Which make_test_ca.sh certificate stands in for each TLS Secret when the daemons run here.
SECRET_CERTIFICATES = {"flopscope-aggregator-tls": "daemon", "flopscope-node-tls": "node",
                       "flopscope-user-tls": f"person-{PERSON}"}
TLS_FILES = {"tls.crt": ".pem", "tls.key": ".key"}  # ca.crt: the CA's ca.pem


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
        tables = (REPO / "docs" / "environment.md").read_text()
        for name in env:
            if name.startswith("FLOPSCOPE_"):
                self.assertIn(f"`{name}`", tables, "documented in docs/environment.md's tables")

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
        # The TLS port: the container port the Service's targetPort names, the Service's port.
        argv = daemon["command"] + daemon.get("args", [])
        tcp_port = int(option(argv, "--tcp").rsplit(":", 1)[1])
        [service_port] = service["spec"]["ports"]
        target = next(p for p in daemon["ports"] if p["name"] == service_port["targetPort"])
        self.assertEqual((target["containerPort"], service_port["port"]), (tcp_port, tcp_port))
        self.assert_tls_secret(spec, daemon, argv)
        self.assert_users_of_person_certificates(spec, daemon)

    def assert_tls_secret(self, spec, daemon, argv):
        """--tls-* name the three files of a Secret (placeholders) mounted read-only; returns the
        Secret's name."""
        volumes = {mount_of(daemon, option(argv, flag)) for flag in
                   ("--tls-cert", "--tls-key", "--tls-ca")}
        self.assertEqual({inside for _, inside in volumes}, {"tls.crt", "tls.key", "ca.crt"})
        [name] = {name for name, _ in volumes}
        tls = volume(spec, name)
        secret = next(s for s in self.of_kind("Secret")
                      if s["metadata"]["name"] == tls["secret"]["secretName"])
        self.assertEqual(set(secret["stringData"]), {"tls.crt", "tls.key", "ca.crt"})
        self.assertTrue(all(v.startswith("REPLACE") for v in secret["stringData"].values()),
                        "placeholders only: never a real key in the repository")
        self.assertTrue(next(m for m in daemon["volumeMounts"] if m["name"] == name)["readOnly"])
        self.assertIn(secret["metadata"]["name"], SECRET_CERTIFICATES)
        return secret

    def assert_users_of_person_certificates(self, spec, daemon):
        """The aggregator's /etc/passwd and /etc/group come from its users ConfigMap, which knows
        the daemon's own user and the sidecar's training uid (the person its certificate names),
        and gives nobody but the daemon the admin group."""
        files = {}
        for mount in daemon["volumeMounts"]:
            if mount["mountPath"] in ("/etc/passwd", "/etc/group"):
                config = next(c for c in self.of_kind("ConfigMap") if c["metadata"]["name"] ==
                              volume(spec, mount["name"])["configMap"]["name"])
                files[mount["mountPath"]] = config["data"][mount["subPath"]]
        self.assertEqual(set(files), {"/etc/passwd", "/etc/group"})
        users = {fields[2]: fields[0] for fields in
                 (line.split(":") for line in files["/etc/passwd"].splitlines())}
        groups = {fields[0]: fields for fields in
                  (line.split(":") for line in files["/etc/group"].splitlines())}
        runs_as = {**spec.get("securityContext", {}), **daemon.get("securityContext", {})}
        self.assertEqual(users[str(runs_as["runAsUser"])], "flopscope")
        self.assertEqual(groups["flopscope"][3], "", "no member of the admin group but its own")
        sidecar_job = self.sidecar_job()
        train = next(filter(is_training, pod_spec(sidecar_job)["containers"]))
        self.assertIn(str(train["securityContext"]["runAsUser"]), users,
                      "the sidecar's person is a user of the aggregator")

    def sidecar_job(self):
        return next(o for o in self.of_kind("Job") if any(
            c.get("restartPolicy") == "Always" for c in pod_spec(o).get("initContainers", [])))

    def aggregator_address(self):
        """HOST:PORT node daemons dial: the Service's DNS name in its namespace, its port."""
        stateful = self.of_kind("StatefulSet")[0]
        service = next(s for s in self.of_kind("Service")
                       if s["metadata"]["name"] == stateful["spec"]["serviceName"])
        return (f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc:"
                f"{service['spec']['ports'][0]['port']}")

    def test_node_daemons_forward_to_the_aggregator_with_their_own_certificates(self):
        daemonset = self.of_kind("DaemonSet")[0]
        sidecar_job = self.sidecar_job()
        secrets = {}
        for obj in (daemonset, sidecar_job):
            spec = pod_spec(obj)
            daemon = next(filter(is_daemon, all_containers(spec)))
            argv = daemon["command"] + daemon.get("args", [])
            self.assertEqual(option(argv, "--upstream"), self.aggregator_address())
            secrets[obj["kind"]] = self.assert_tls_secret(spec, daemon, argv)
        # The sidecar's key is in its pod: the training container must not mount its volume.
        spec = pod_spec(sidecar_job)
        sidecar = next(filter(is_daemon, spec["initContainers"]))
        argv = sidecar["command"] + sidecar["args"]
        key_volume, _ = mount_of(sidecar, option(argv, "--tls-key"))
        for train in filter(is_training, spec["containers"]):
            self.assertNotIn(key_volume, [m["name"] for m in train["volumeMounts"]])
        # The node certificate stays in the operators' namespace; the sidecar's Secret lives
        # with the Job in the training namespace, so it holds a person's certificate.
        self.assertEqual(secrets["DaemonSet"]["metadata"]["namespace"], "flopscope")
        self.assertEqual(SECRET_CERTIFICATES[secrets["DaemonSet"]["metadata"]["name"]], "node")
        self.assertNotIn("namespace", secrets["Job"]["metadata"])
        self.assertTrue(SECRET_CERTIFICATES[secrets["Job"]["metadata"]["name"]].startswith(
            "person-"))
        # The sidecar's data dir is an emptyDir: it drains its outbox before the pod is gone.
        self.assertIn("emptyDir", volume(spec, mount_of(sidecar, option(argv, "--data-dir"))[0]))
        drain = float(option(argv, "--upstream-drain-s"))
        self.assertGreater(drain, 0)
        self.assertLess(drain, spec["terminationGracePeriodSeconds"], "within the grace period")

    def test_daemon_commands_and_probes_run_against_the_build(self):
        with tempfile.TemporaryDirectory(prefix="flopscope-k8s-") as tmp:
            root = Path(tmp)
            certs = make_test_ca(root / "certs")
            stateful = self.of_kind("StatefulSet")[0]
            container = next(filter(is_daemon, pod_spec(stateful)["containers"]))
            aggregator, probe = self.start_daemon(stateful, container, root / "aggregator", certs)
            try:
                server = aggregator.tls_address()
                self.run_probes(container, probe)
                for obj in self.workloads:
                    if obj is stateful:
                        continue
                    for container in filter(is_daemon, all_containers(pod_spec(obj))):
                        name = f"{obj['metadata']['name']}/{container['name']}"
                        with self.subTest(name):
                            self.run_node_daemon(obj, container, root / name, certs, server)
            finally:
                self.assertEqual(aggregator.stop(), 0, aggregator.log())
            self.assertNotEqual(subprocess.run(probe, capture_output=True).returncode, 0,
                                "the aggregator's probe fails once it is gone")

    def run_node_daemon(self, obj, container, root, certs, server):
        node, probe = self.start_daemon(obj, container, root, certs, server)
        try:
            self.run_probes(container, probe)
            job = f"k8s-{obj['kind'].lower()}"
            run_tiny_job(node.socket, job, root / "spool")
            self.assertEqual(forwarded_ranks(server, certs, job), [0], node.log())
        finally:
            self.assertEqual(node.stop(), 0, node.log())
        # With the daemon gone the probe fails, as a liveness probe must.
        self.assertNotEqual(subprocess.run(probe, capture_output=True).returncode, 0)

    def start_daemon(self, obj, container, root, certs, server=None):
        """The container's command and args run here: each volume it mounts a directory under
        `root` (a TLS Secret's holding the make_test_ca.sh files that stand in for it), --tcp on
        a free loopback port, --upstream the aggregator's real address. Returns the daemon and
        its startup probe's command, localized the same way, once that probe passes."""
        spec = pod_spec(obj)
        for mount in container["volumeMounts"]:
            directory = root / mount["name"]
            directory.mkdir(parents=True, exist_ok=True)
            secret = next((v["secret"] for v in spec.get("volumes", [])
                           if v["name"] == mount["name"] and "secret" in v), None)
            if secret is not None:
                made = SECRET_CERTIFICATES[secret["secretName"]]
                for key, suffix in TLS_FILES.items():
                    shutil.copy(certs / f"{made}{suffix}", directory / key)
                shutil.copy(certs / "ca.pem", directory / "ca.crt")

        def local(argv):
            words = [local_binary(argv[0])]
            for word in argv[1:]:
                inside = mount_of(container, word) if word.startswith("/") else None
                words.append(str(root.joinpath(*inside)) if inside else word)
            return words

        argv = local(container["command"] + container.get("args", []))
        if "--tcp" in argv:
            argv[argv.index("--tcp") + 1] = "127.0.0.1:0"
        if "--upstream" in argv:
            argv[argv.index("--upstream") + 1] = server
        argv.insert(1, "--collect-spools")  # orphaned spools here are not the test's to take
        daemon = StartedDaemon(argv, option(argv, "--socket"), root / "flopscoped.log")
        probe = local(container["startupProbe"]["exec"]["command"])
        deadline = time.monotonic() + 20
        while subprocess.run(probe, capture_output=True).returncode != 0:
            self.assertLess(time.monotonic(), deadline, daemon.log())
            time.sleep(0.1)
        return daemon, probe

    def run_probes(self, container, startup):
        for name in ("livenessProbe", "readinessProbe"):
            command = container[name]["exec"]["command"]
            self.assertEqual(command, container["startupProbe"]["exec"]["command"], name)
            result = client(startup[1:])
            self.assertEqual(result.returncode, 0, result.stderr)


if __name__ == "__main__":
    unittest.main()
