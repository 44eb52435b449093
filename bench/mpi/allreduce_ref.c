/* The MPI reference of thd-bench's datachannel suite: MPI_Allreduce (float32 sum) of
 * one buffer, timed the way the suite times thd's all_reduce, so the two bus
 * bandwidths compare libraries, not methods.
 *
 *   mpirun -n N ... thd-bench-mpi-allreduce --bytes B --reps R --min-time S --name NAME
 *
 * Timing: one warm-up call; one timed call sizes a repetition to at least S seconds
 * (rank 0's count is broadcast, so every rank makes the same number of calls); each
 * of the R repetitions starts at a barrier, and its time per call is the slowest
 * rank's. Rank 0 prints the median repetition as bus bandwidth (nccl-tests:
 * bytes / time x 2(N-1)/N), one line on stdout: "NAME value GB/s". Any error is a
 * message on stderr and a nonzero exit. */
#include <mpi.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct settings {
  long long bytes;
  int reps;
  double min_time;
  const char* name;
};

static int parse_settings(int argc, char** argv, struct settings* s) {
  s->bytes = 64LL << 20;
  s->reps = 5;
  s->min_time = 0.2;
  s->name = "ref.mpi.allreduce";
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "allreduce_ref: %s needs a value\n", argv[i]);
      return 0;
    }
    const char* value = argv[i + 1];
    char* end = NULL;
    errno = 0;
    if (strcmp(argv[i], "--bytes") == 0) {
      s->bytes = strtoll(value, &end, 10);
    } else if (strcmp(argv[i], "--reps") == 0) {
      s->reps = (int)strtol(value, &end, 10);
    } else if (strcmp(argv[i], "--min-time") == 0) {
      s->min_time = strtod(value, &end);
    } else if (strcmp(argv[i], "--name") == 0) {
      s->name = value;
      continue;
    } else {
      fprintf(stderr, "allreduce_ref: unknown option '%s'\n", argv[i]);
      return 0;
    }
    if (errno != 0 || end == value || *end != '\0') {
      fprintf(stderr, "allreduce_ref: bad value for %s: '%s'\n", argv[i], value);
      return 0;
    }
  }
  if (s->bytes < 4 || s->bytes % 4 != 0 || s->reps < 1 || s->reps > 1000 || !(s->min_time > 0)) {
    fprintf(stderr, "allreduce_ref: need --bytes a positive multiple of 4, --reps 1..1000, "
                    "--min-time > 0\n");
    return 0;
  }
  return 1;
}

/* Seconds per call of `iters` calls on this rank, after a barrier. */
static double time_calls(float* buf, int count, long long iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long long i = 0; i < iters; ++i) {
    MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  const double per_call = (MPI_Wtime() - t0) / (double)iters;
  double slowest = 0;
  MPI_Allreduce(&per_call, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Every element must be 1 + 2 + ... + size: a benchmark of a wrong result is void. */
static int check_sum(float* buf, int count, int rank, int size) {
  for (int i = 0; i < count; ++i) buf[i] = (float)(rank + 1);
  MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const float expected = (float)size * (float)(size + 1) / 2.0f;
  int bad = 0;
  for (int i = 0; i < count; ++i) bad |= buf[i] != expected;
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (any_bad && rank == 0) fprintf(stderr, "allreduce_ref: MPI_Allreduce gave a wrong sum\n");
  return !any_bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  struct settings s;
  if (!parse_settings(argc, argv, &s)) MPI_Abort(MPI_COMM_WORLD, 2);
  const long long count = s.bytes / 4;
  if (count > 0x7fffffff) {
    fprintf(stderr, "allreduce_ref: --bytes too large for one MPI call\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  float* buf = malloc((size_t)s.bytes);
  double* samples = malloc(sizeof(double) * (size_t)s.reps);
  if (buf == NULL || samples == NULL) {
    fprintf(stderr, "allreduce_ref: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (!check_sum(buf, (int)count, rank, size)) MPI_Abort(MPI_COMM_WORLD, 1);
  /* Zeros stay zeros under repeated sums: no overflow to inf, no denormals. */
  memset(buf, 0, (size_t)s.bytes);

  (void)time_calls(buf, (int)count, 1); /* warm-up */
  const double once = time_calls(buf, (int)count, 1);
  long long iters = (long long)ceil(s.min_time / (once > 1e-9 ? once : 1e-9));
  if (iters < 1) iters = 1;
  MPI_Bcast(&iters, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  for (int r = 0; r < s.reps; ++r) samples[r] = time_calls(buf, (int)count, iters);

  if (rank == 0) {
    qsort(samples, (size_t)s.reps, sizeof(double), compare_doubles);
    const double median = s.reps % 2 ? samples[s.reps / 2]
                                     : 0.5 * (samples[s.reps / 2 - 1] + samples[s.reps / 2]);
    const double busbw = (double)s.bytes / median * 2.0 * (size - 1) / size / 1e9;
    printf("%s %.6f GB/s\n", s.name, busbw);
    fflush(stdout);
  }
  free(samples);
  free(buf);
  MPI_Finalize();
  return 0;
}
