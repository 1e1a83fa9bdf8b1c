void vs_bench_print_placeholder(void);
