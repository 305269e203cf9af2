// paths is the C (wasi-libc) twin of the Go guest fsops's "paths": it writes each argument as a
// file whose content is its own name, and prints "P ok" or "P ERR <errno>".
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			printf("%s ERR %s\n", argv[i], strerror(errno));
			continue;
		}
		size_t n = strlen(argv[i]);
		if (write(fd, argv[i], n) != (ssize_t)n) {
			printf("%s ERR %s\n", argv[i], strerror(errno));
			close(fd);
			continue;
		}
		close(fd);
		printf("%s ok\n", argv[i]);
	}
	return 0;
}
