// The file LibTorch's headers are precompiled with (model/CMakeLists.txt); it holds no code.
