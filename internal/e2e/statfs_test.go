package e2e_test

import "syscall"

type syscallStatfs struct{ syscall.Statfs_t }

func (s *syscallStatfs) free() int64 { return int64(s.Bavail) * s.Bsize }

func statfs(path string, st *syscallStatfs) error { return syscall.Statfs(path, &st.Statfs_t) }
