// A shared object with nothing in it: tests preload it in place of libflopscope_inject.so to check
// what `flopscope run` does around the injector without depending on the injector's build.
extern "C" int flopscope_test_noop_preload_marker() { return 0; }
