/* Process identity (issue 21): cgroup path shapes parsed exactly (table),
 * /proc/PID/cgroup on hybrid and v2 hosts, the kubelet's pod directory, and
 * the cache (resolve once, forget at exit) against a fake /proc. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ident.h"

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID64B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define UID "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define UID_ "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0"

static const struct {
	const char *path;
	bool found;
	const char *id, *runtime, *uid, *qos;
} shapes[] = {
	/* Kubernetes, systemd driver, cgroup v2 */
	{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	 ".slice/cri-containerd-" ID64 ".scope",
	 true, ID64, "containerd", UID, "burstable"},
	{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	 ".slice/crio-" ID64 ".scope",
	 true, ID64, "cri-o", UID, "besteffort"},
	{"/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" ID64 ".scope",
	 true, ID64, "docker", UID, "guaranteed"},
	/* the pod's own slice (a pod-level process, no container) */
	{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice",
	 true, "", "", UID, "burstable"},
	/* Kubernetes, cgroupfs driver (v1 and v2): bare id, runtime unknown */
	{"/kubepods/besteffort/pod" UID "/" ID64, true, ID64, "", UID, "besteffort"},
	{"/kubepods/burstable/pod" UID "/" ID64, true, ID64, "", UID, "burstable"},
	{"/kubepods/pod" UID "/" ID64, true, ID64, "", UID, "guaranteed"},
	{"/kubepods/burstable/pod" UID "/crio-" ID64, true, ID64, "cri-o", UID, "burstable"},
	/* static pod: a 32-hex-digit UID */
	{"/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" ID64, true, ID64, "",
	 "0123456789abcdef0123456789abcdef", "burstable"},
	/* seen from inside a cgroup namespace */
	{"/../../kubepods.slice/kubepods-pod" UID_ ".slice/cri-containerd-" ID64 ".scope",
	 true, ID64, "containerd", UID, "guaranteed"},
	/* docker */
	{"/docker/" ID64, true, ID64, "docker", "", ""},
	{"/system.slice/docker-" ID64 ".scope", true, ID64, "docker", "", ""},
	/* podman, rootful and rootless; conmon is not the container */
	{"/machine.slice/libpod-" ID64 ".scope", true, ID64, "podman", "", ""},
	{"/machine.slice/libpod-" ID64 ".scope/container", true, ID64, "podman", "", ""},
	{"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID64 ".scope",
	 true, ID64, "podman", "", ""},
	{"/libpod_parent/libpod-" ID64, true, ID64, "podman", "", ""},
	{"/machine.slice/libpod-conmon-" ID64 ".scope", false, "", "", "", ""},
	{"/system.slice/crio-conmon-" ID64 ".scope", false, "", "", "", ""},
	/* containerd without Kubernetes */
	{"/default/" ID64, true, ID64, "containerd", "", ""},
	{"/system.slice/cri-containerd-" ID64 ".scope", true, ID64, "containerd", "", ""},
	/* nested: the deepest container wins */
	{"/docker/" ID64B "/docker/" ID64, true, ID64, "docker", "", ""},
	/* not containers */
	{"/", false, "", "", "", ""},
	{"/user.slice/user-0.slice/session-3.scope", false, "", "", "", ""},
	{"/system.slice/docker.service", false, "", "", "", ""},
	{"/docker/" "0123456789abcdef", false, "", "", "", ""},
	{"/docker/" ID64 "0", false, "", "", "", ""},
	{"/docker/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
	 false, "", "", "", ""},
	{"/process_api/bbca04a5e6946e49aaefeef92532d880", false, "", "", "", ""},
	/* a pod component outside kubepods is not a pod */
	{"/pod" UID "/x", false, "", "", "", ""},
	/* a malformed UID */
	{"/kubepods/burstable/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fX/" ID64, true, ID64,
	 "", "", ""},
};

START_TEST(path_shapes)
{
	struct nt_identity id;

	memset(&id, 0, sizeof(id));
	bool found = nt_ident_parse_path(shapes[_i].path, &id);
	ck_assert_msg(found == shapes[_i].found, "%s: found %d", shapes[_i].path, found);
	ck_assert_str_eq(id.container_id, shapes[_i].id);
	ck_assert_str_eq(id.runtime, shapes[_i].runtime);
	ck_assert_str_eq(id.pod_uid, shapes[_i].uid);
	ck_assert_str_eq(id.qos, shapes[_i].qos);
}
END_TEST

START_TEST(proc_cgroup_v2_and_hybrid)
{
	struct nt_identity id;

	nt_ident_parse_proc_cgroup("0::/kubepods.slice/kubepods-pod" UID_
				   ".slice/cri-containerd-" ID64 ".scope\n", &id);
	ck_assert_str_eq(id.cgroup, "/kubepods.slice/kubepods-pod" UID_
		       ".slice/cri-containerd-" ID64 ".scope");
	ck_assert_str_eq(id.container_id, ID64);
	ck_assert_str_eq(id.pod_uid, UID);
	/* hybrid: v2 at the root, the container in the v1 hierarchies */
	nt_ident_parse_proc_cgroup("12:memory:/docker/" ID64 "\n4:cpu:/docker/" ID64
				   "\n0::/\n", &id);
	ck_assert_str_eq(id.cgroup, "/docker/" ID64);
	ck_assert_str_eq(id.container_id, ID64);
	ck_assert_str_eq(id.runtime, "docker");
	/* this VM: nothing of a container anywhere */
	nt_ident_parse_proc_cgroup("9:name=systemd:/\n4:memory:/process_api/bbca\n0::/\n", &id);
	ck_assert_str_eq(id.cgroup, "/");
	ck_assert_str_eq(id.container_id, "");
	nt_ident_parse_proc_cgroup("", &id);
	ck_assert_str_eq(id.cgroup, "");
}
END_TEST

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(kubelet_dir_and_cache)
{
	char root[] = "/tmp/nt-ident-XXXXXX", path[512];
	struct nt_ident_cache c;
	struct nt_identity id;

	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(path, sizeof(path), "mkdir -p %s/proc/4242 %s/kubelet/pods/" UID
		 "/volumes/kubernetes.io~projected/kube-api-access-x7k2p", root, root);
	ck_assert_int_eq(system(path), 0);
	snprintf(path, sizeof(path), "%s/proc/4242/cgroup", root);
	write_file(path, "0::/kubepods/burstable/pod" UID "/" ID64 "\n");
	snprintf(path, sizeof(path), "%s/kubelet/pods/" UID "/etc-hosts", root);
	write_file(path, "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
			 "::1\tlocalhost ip6-localhost ip6-loopback\n"
			 "fe00::0\tip6-localnet\n10.244.1.7\ttrainer-0\n");
	snprintf(path, sizeof(path), "%s/kubelet/pods/" UID
		 "/volumes/kubernetes.io~projected/kube-api-access-x7k2p/namespace", root);
	write_file(path, "ml-team");

	char proc[300], kubelet[300];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(kubelet, sizeof(kubelet), "%s/kubelet", root);
	ck_assert_int_eq(nt_ident_cache_init(&c, 0, proc, kubelet), 0);
	ck_assert_int_eq(nt_ident_get(&c, 4242, &id), 0);
	ck_assert_str_eq(id.pod_name, "trainer-0");
	ck_assert_str_eq(id.pod_namespace, "ml-team");
	ck_assert_str_eq(id.qos, "burstable");
	/* cached: the file going away changes nothing until the exit */
	snprintf(path, sizeof(path), "%s/proc/4242/cgroup", root);
	unlink(path);
	ck_assert_int_eq(nt_ident_get(&c, 4242, &id), 0);
	ck_assert_str_eq(id.container_id, ID64);
	ck_assert_uint_eq(c.resolved, 1);
	ck_assert_uint_eq(c.hits, 1);
	/* exited: kept for late records until a sweep after the grace */
	nt_ident_forget(&c, 4242);
	nt_ident_sweep(&c, 60ull * 1000000000ull);
	ck_assert_uint_eq(nt_ident_cache_size(&c), 1);
	ck_assert_int_eq(nt_ident_get(&c, 4242, &id), 0);
	ck_assert_str_eq(id.pod_name, "trainer-0");
	nt_ident_sweep(&c, 0);
	ck_assert_uint_eq(nt_ident_cache_size(&c), 0);
	ck_assert_int_eq(nt_ident_get(&c, 4242, &id), -ESRCH);
	ck_assert_str_eq(id.container_id, "");
	/* gone: remembered, not read again */
	ck_assert_int_eq(nt_ident_get(&c, 4242, &id), -ESRCH);
	ck_assert_uint_eq(c.failed, 1);
	nt_ident_cache_fini(&c);

	/* no kubelet directory, a downward-API volume of the same pod */
	snprintf(path, sizeof(path), "mkdir -p %s/proc/4243 %s/dw", root, root);
	ck_assert_int_eq(system(path), 0);
	snprintf(path, sizeof(path), "%s/proc/4243/cgroup", root);
	write_file(path, "0::/kubepods/pod" UID "/" ID64 "\n");
	snprintf(path, sizeof(path), "%s/dw/uid", root);
	write_file(path, UID);
	snprintf(path, sizeof(path), "%s/dw/name", root);
	write_file(path, "sidecar-pod");
	snprintf(path, sizeof(path), "%s/dw/namespace", root);
	write_file(path, "infer");
	snprintf(path, sizeof(path), "%s/dw", root);
	ck_assert_int_eq(nt_ident_cache_init(&c, 0, proc, NULL), 0);
	ck_assert_int_eq(nt_ident_cache_downward(&c, path), 0);
	ck_assert_int_eq(nt_ident_get(&c, 4243, &id), 0);
	ck_assert_str_eq(id.pod_name, "sidecar-pod");
	ck_assert_str_eq(id.pod_namespace, "infer");
	ck_assert_str_eq(id.qos, "guaranteed");
	nt_ident_cache_fini(&c);
	ck_assert_int_eq(nt_ident_cache_downward(&c, "/nonexistent"), -1);
	snprintf(path, sizeof(path), "rm -rf %s", root);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

START_TEST(cache_bounded)
{
	struct nt_ident_cache c;
	struct nt_identity id;

	ck_assert_int_eq(nt_ident_cache_init(&c, 4, "/proc", NULL), 0);
	ck_assert_int_eq(nt_ident_get(&c, (uint32_t)getpid(), &id), 0);
	ck_assert_str_ne(id.cgroup, "");
	ck_assert_int_eq(nt_ident_get(&c, 1, &id), 0);
	ck_assert_uint_eq(nt_ident_cache_size(&c), 2);
	for (uint32_t pid = 3999990; pid < 3999994; pid++) /* gone pids */
		ck_assert_int_eq(nt_ident_get(&c, pid, &id), -ESRCH);
	ck_assert_uint_le(nt_ident_cache_size(&c), 4); /* bounded */
	nt_ident_cache_fini(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ident");
	TCase *tc = tcase_create("ident");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, path_shapes, 0, (int)(sizeof(shapes) / sizeof(shapes[0])));
	tcase_add_test(tc, proc_cgroup_v2_and_hybrid);
	tcase_add_test(tc, kubelet_dir_and_cache);
	tcase_add_test(tc, cache_bounded);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
