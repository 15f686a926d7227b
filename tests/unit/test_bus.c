/* The bus: schema registry, glob fan-out and drop counting. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"

struct rec {
	struct nt_event_hdr hdr;
	uint64_t value;
};

static const struct nt_field rec_fields[] = {
	NT_FIELD(struct rec, value, NT_F_U64, "bytes", "a value"),
};
static const struct nt_schema cuda_alloc = {
	.name = "cuda.alloc", .fields = rec_fields, .n_fields = 1,
	.min_size = sizeof(struct rec)};
static const struct nt_schema cuda_free = {
	.name = "cuda.free", .fields = rec_fields, .n_fields = 1,
	.min_size = sizeof(struct rec)};
static const struct nt_schema sched_switch = {
	.name = "sched.switch", .fields = rec_fields, .n_fields = 1,
	.min_size = sizeof(struct rec)};

struct sink {
	int got;
	uint64_t last_value;
	const char *last_type;
};

static void deliver(void *who, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema)
{
	struct sink *s = who;

	s->got++;
	s->last_value = ((const struct rec *)ev)->value;
	s->last_type = schema->name;
}

static struct rec make(int type, uint64_t value)
{
	struct rec r = {.hdr = {.type = (uint32_t)type, .size = sizeof(r), .pid = 7},
			.value = value};
	return r;
}

START_TEST(fan_out_by_glob)
{
	struct nt_bus bus;
	struct sink all = {0}, cuda = {0}, frees = {0};
	const char *why;

	nt_bus_init(&bus, deliver);
	int alloc_id = nt_bus_register(&bus, "p", &cuda_alloc, &why);
	int free_id = nt_bus_register(&bus, "p", &cuda_free, &why);
	int sw_id = nt_bus_register(&bus, "q", &sched_switch, &why);
	ck_assert_int_eq(alloc_id, 1);
	ck_assert_int_eq(free_id, 2);
	ck_assert_int_eq(sw_id, 3);
	nt_bus_subscribe(&bus, &all, "*");
	nt_bus_subscribe(&bus, &cuda, "cuda.*");
	nt_bus_subscribe(&bus, &cuda, "cuda.alloc"); /* no double delivery */
	nt_bus_subscribe(&bus, &frees, "*.free");

	struct rec r = make(alloc_id, 4096);
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), 2);
	r = make(free_id, 4096);
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), 3);
	r = make(sw_id, 1);
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), 1);
	ck_assert_int_eq(all.got, 3);
	ck_assert_int_eq(cuda.got, 2);
	ck_assert_int_eq(frees.got, 1);
	ck_assert_str_eq(frees.last_type, "cuda.free");
	ck_assert_uint_eq(cuda.last_value, 4096);
	nt_bus_fini(&bus);
}
END_TEST

/* A subscriber that subscribes while an event is delivered to it (a
 * detector that adds a pattern on its first event) used to free the
 * subscriber array the bus was iterating; the chunk then came back from
 * the next malloc of that size, filled here with a stranger, and the rest
 * of the fan-out went to it. */
static struct nt_bus *reentrant_bus;
static struct sink first_sink, second_sink, stranger;
static int order[8], n_order;

static void deliver_reentrant(void *who, const struct nt_event_hdr *ev,
			      const struct nt_schema *schema)
{
	(void)ev;
	(void)schema;
	order[n_order++] = who == &first_sink ? 1 : who == &second_sink ? 2 : 9;
	if (who != &first_sink || first_sink.got++)
		return;
	nt_bus_subscribe(reentrant_bus, &first_sink, "sched.*");
	/* what glibc hands out next for the freed array's size */
	void **junk = malloc(2 * sizeof(void *));
	junk[0] = junk[1] = &stranger;
	free(junk);
	junk = malloc(2 * sizeof(void *));
	junk[0] = junk[1] = &stranger;
	/* left allocated: it stands where the freed array was */
	static void **keep;
	keep = junk;
	(void)keep;
}

START_TEST(subscribe_during_delivery)
{
	struct nt_bus bus;
	const char *why;

	reentrant_bus = &bus;
	nt_bus_init(&bus, deliver_reentrant);
	int id = nt_bus_register(&bus, "p", &cuda_alloc, &why);
	nt_bus_subscribe(&bus, &first_sink, "cuda.*");
	nt_bus_subscribe(&bus, &second_sink, "*");
	struct rec r = make(id, 1);
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), 2);
	ck_assert_int_eq(n_order, 2);
	ck_assert_int_eq(order[0], 1);
	ck_assert_int_eq(order[1], 2); /* not the stranger */
	/* the new subscription counts from the next event on */
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), 2);
	ck_assert_int_eq(order[2], 1);
	ck_assert_int_eq(order[3], 2);
	nt_bus_fini(&bus);
}
END_TEST

START_TEST(drops_are_counted)
{
	struct nt_bus bus;
	struct sink all = {0};
	const char *why;

	nt_bus_init(&bus, deliver);
	int id = nt_bus_register(&bus, "p", &cuda_alloc, &why);
	nt_bus_subscribe(&bus, &all, "*");
	struct rec r = make(99, 1);
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), -1);
	r = make(0, 1);
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), -1);
	r = make(id, 1);
	r.hdr.size = sizeof(struct nt_event_hdr) + 4; /* shorter than the schema */
	ck_assert_int_eq(nt_bus_publish(&bus, &r.hdr), -1);
	ck_assert_uint_eq(bus.dropped_unknown, 2);
	ck_assert_uint_eq(bus.dropped_short, 1);
	ck_assert_int_eq(all.got, 0);
	nt_bus_fini(&bus);
}
END_TEST

START_TEST(registration_rules)
{
	struct nt_bus bus;
	const char *why;
	static const struct nt_schema imposter = {
		.name = "cuda.alloc", .min_size = sizeof(struct nt_event_hdr)};
	static const struct nt_field bad_field[] = {
		{.name = "x", .type = NT_F_U32, .offset = 40, .size = 8}};
	static const struct nt_schema bad = {
		.name = "bad", .fields = bad_field, .n_fields = 1, .min_size = 48};
	static const struct nt_field outside[] = {
		{.name = "x", .type = NT_F_U64, .offset = 48, .size = 8}};
	static const struct nt_schema beyond = {
		.name = "beyond", .fields = outside, .n_fields = 1, .min_size = 48};

	nt_bus_init(&bus, deliver);
	ck_assert_int_eq(nt_bus_register(&bus, "p", &cuda_alloc, &why), 1);
	ck_assert_int_eq(nt_bus_register(&bus, "p2", &cuda_alloc, &why), 1);
	ck_assert_int_eq(nt_bus_register(&bus, "p", &imposter, &why), -EEXIST);
	ck_assert_int_eq(nt_bus_register(&bus, "p", &bad, &why), -EINVAL);
	ck_assert_str_eq(why, "field size does not match its type");
	ck_assert_int_eq(nt_bus_register(&bus, "p", &beyond, &why), -EINVAL);
	ck_assert_int_eq(nt_bus_type_id(&bus, "cuda.alloc"), 1);
	nt_bus_forget(&bus, "p");
	ck_assert_ptr_null(nt_bus_schema(&bus, 1));
	nt_bus_fini(&bus);
}
END_TEST

START_TEST(glob)
{
	ck_assert(nt_glob_match("*", "anything.here"));
	ck_assert(nt_glob_match("cuda.*", "cuda.launch"));
	ck_assert(!nt_glob_match("cuda.*", "cudax.launch"));
	ck_assert(nt_glob_match("alert.cuda_*", "alert.cuda_oom"));
	ck_assert(nt_glob_match("*.report", "sched.report"));
	ck_assert(!nt_glob_match("*.report", "sched.reports"));
	ck_assert(nt_glob_match("s?hed.*", "sched.switch"));
	ck_assert(!nt_glob_match("", "x"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bus");
	TCase *tc = tcase_create("bus");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, fan_out_by_glob);
	tcase_add_test(tc, drops_are_counted);
	tcase_add_test(tc, subscribe_during_delivery);
	tcase_add_test(tc, registration_rules);
	tcase_add_test(tc, glob);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
