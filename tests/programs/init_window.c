/* A freestanding static program (no C library, no start files): the first thing it does
 * is try every door back to the host that the init window opened (tests/init_window.rs).
 *
 * argv[1]: "1" to aim at PID 1 (full layer), "ppid" to aim at its parent (layer 2).
 * It tries, in this order and at once: ptrace(PTRACE_SEIZE), then opening the target's
 * /proc/PID/mem, maps, environ, and fd/0..15 (O_WRONLY: a pipe's write end would be a way
 * to forge a record). It prints one line, "seize=E mem=E maps=E environ=E fd=E,E,…" with
 * each call's result (0 or a negative errno), and exits 0 when every call failed, 3 when
 * one succeeded. */

typedef unsigned long u64;

#if defined(__x86_64__)
#define NR_write 1
#define NR_openat 257
#define NR_ptrace 101
#define NR_getppid 110
#define NR_exit_group 231
static long sys4(long n, long a, long b, long c, long d) {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
}
__asm__(".globl _start\n_start:\n xor %ebp,%ebp\n mov %rsp,%rdi\n and $-16,%rsp\n call cmain\n ud2\n");
#elif defined(__aarch64__)
#define NR_write 64
#define NR_openat 56
#define NR_ptrace 117
#define NR_getppid 173
#define NR_exit_group 94
static long sys4(long n, long a, long b, long c, long d) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
}
__asm__(".globl _start\n_start:\n mov x29, #0\n mov x30, #0\n mov x0, sp\n bl cmain\n brk #1\n");
#else
#error "x86_64 or aarch64"
#endif

#define AT_FDCWD (-100)
#define O_RDONLY 0
#define O_WRONLY 1
#define O_NONBLOCK 04000
#define O_CLOEXEC 02000000
#define PTRACE_SEIZE 0x4206

static char out[512];
static int len;

static void put(const char *s) {
  while (*s && len < (int)sizeof(out) - 1) out[len++] = *s++;
}

static void num(long v) {
  char buf[24];
  int i = 0;
  if (v < 0) {
    put("-");
    v = -v;
  }
  do {
    buf[i++] = (char)('0' + v % 10);
    v /= 10;
  } while (v && i < 23);
  while (i) {
    char c[2] = {buf[--i], 0};
    put(c);
  }
}

/* "/proc/<pid>/<rest>" into p. */
static void path(char *p, long pid, const char *rest) {
  const char *pre = "/proc/";
  char digits[24];
  int i = 0, n = 0;
  while (*pre) p[n++] = *pre++;
  do {
    digits[i++] = (char)('0' + pid % 10);
    pid /= 10;
  } while (pid && i < 23);
  while (i) p[n++] = digits[--i];
  p[n++] = '/';
  while (*rest) p[n++] = *rest++;
  p[n] = 0;
}

static long try_open(long pid, const char *rest, long flags) {
  char p[64];
  path(p, pid, rest);
  return sys4(NR_openat, AT_FDCWD, (long)p, flags | O_CLOEXEC | O_NONBLOCK, 0);
}

void cmain(long *sp) {
  char **argv = (char **)(sp + 1);
  long target = 1;
  long seize, mem, maps, env, fds[16];
  int ok = 1, i;
  if (sp[0] > 1 && argv[1][0] == 'p') target = sys4(NR_getppid, 0, 0, 0, 0);
  seize = sys4(NR_ptrace, PTRACE_SEIZE, target, 0, 0);
  mem = try_open(target, "mem", O_RDONLY);
  maps = try_open(target, "maps", O_RDONLY);
  env = try_open(target, "environ", O_RDONLY);
  for (i = 0; i < 16; i++) {
    char rest[8] = {'f', 'd', '/', 0, 0, 0};
    if (i < 10) {
      rest[3] = (char)('0' + i);
    } else {
      rest[3] = '1';
      rest[4] = (char)('0' + i - 10);
    }
    fds[i] = try_open(target, rest, O_WRONLY);
  }
  put("seize=");
  num(seize);
  put(" mem=");
  num(mem);
  put(" maps=");
  num(maps);
  put(" environ=");
  num(env);
  put(" fd=");
  for (i = 0; i < 16; i++) {
    if (i) put(",");
    num(fds[i] < 0 ? fds[i] : 0);
    if (fds[i] >= 0) ok = 0;
  }
  put("\n");
  if (seize >= 0 || mem >= 0 || maps >= 0 || env >= 0) ok = 0;
  sys4(NR_write, 1, (long)out, len, 0);
  sys4(NR_exit_group, ok ? 0 : 3, 0, 0, 0);
  for (;;) {
  }
}
